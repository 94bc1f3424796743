"""Slurm as a launcher: every run of a sweep becomes a job step of the allocation it runs in.

allocation.py: the allocation (SLURM_* environment), where a run goes and whether it fits;
steps.py: the srun command of a run, running it, and what Slurm did to it (time limit, scancel);
task.py: the first thing every task of a step runs (records the step, maps Slurm's task
environment for torch.distributed), then the framework's worker; script.py: the sbatch file of
`scalebench slurm-script`.

Kept import-light: task.py runs at the start of every task. Imports spec and records; steps.py
also frameworks.base and process (the launch outcome, killing a tree).
"""
