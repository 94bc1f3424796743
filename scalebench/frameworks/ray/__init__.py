"""Ray Train (TorchTrainer, the successor of RaySGD): embedded local cluster or an existing one.

options.py: Options, the [ray] table, flags; cluster.py: is Ray usable, reachability, the
embedded cluster (head.py holds it); resources.py: what a run asks of a cluster and whether it
fits; launcher.py: the adapter; driver.py: one run's TorchTrainer.fit; worker.py: the loop
inside each Ray Train worker and its Comm.
"""

from scalebench.frameworks.ray.cluster import EmbeddedCluster, probe, unreachable
from scalebench.frameworks.ray.launcher import RayTrain
from scalebench.frameworks.ray.options import Options

FRAMEWORK = RayTrain()

__all__ = ["FRAMEWORK", "EmbeddedCluster", "Options", "RayTrain", "probe", "unreachable"]
