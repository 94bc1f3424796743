"""Node vetting: every node and every link of a Slurm allocation measured, verdicts, and the
vetted node list a sweep then places its runs on.

schedule.py: the round-robin tournament of node pairs; verdict.py: the verdict, a pure function
over the figures; faults.py: the documented fault injections; plan.py: the vetting as jobs of
the vet task (tasks/vet.py); run.py: plan -> executor -> figures -> verdict -> files;
files.py: vet.json and the node lists; page.py: vet.md and vet.html. Imports running (the
executor), tasks, frameworks, slurm, report (html helpers), records, hardware and spec.
"""
