"""Horovod, launched with horovodrun (gloo controller); multi-host through --hosts/--hostfile.

options.py: Options, the [horovod] table, flags, checks; install.py: is a usable Horovod here;
launcher.py: the horovodrun command and the adapter; worker.py: HorovodComm and the worker entry.
"""

from scalebench.frameworks.horovod.launcher import Horovod
from scalebench.frameworks.horovod.options import Options

FRAMEWORK = Horovod()

__all__ = ["FRAMEWORK", "Horovod", "Options"]
