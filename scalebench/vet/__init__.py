"""Node vetting: every node and every link of a Slurm allocation measured, verdicts, and the
vetted node list a sweep then places its runs on.

topology.py: leaf switches (Slurm's tree topology or a topology.conf); schedule.py: which pairs
meet in which round (tournament, leaves, K rounds, retests), pure; verdict.py: the verdict, a
pure function over the figures; plan.py: the probe steps as jobs of the vet task
(tasks/vet.py); run.py: node steps (halved until a failing node stands alone) -> schedule ->
pair step -> verdict -> retests -> verdict -> files;
files.py: vet.json and the node lists; page.py: vet.md and vet.html. Imports running (the
executor), tasks, frameworks, slurm, report (html helpers), records, hardware and spec.
"""
