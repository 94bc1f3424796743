"""Kubernetes as a launcher: each framework x node count of a sweep becomes one operator job
(Horovod: MPIJob; DDP: TrainJob or PyTorchJob; Ray Train: RayJob) whose pods run a
`scalebench sweep` of that launch.

plan.py: the launches (pure: workload values and the target cluster in); render.py: their
manifests (pure); validate.py: strict checks against the vendored CRDs (vendor/, with their
provenance); results.py: records as `SCALEBENCH_RESULT {json}` log lines and back; watch.py: a
small HTTP client loop over the operators' status fields.

Imports spec, records, slurm.script (the default worker counts) and the Horovod launcher's
knob_env (its knobs as environment); never running, analysis, the report or commands.
"""
