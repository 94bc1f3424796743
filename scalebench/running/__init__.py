"""Running and recording a sweep: the executor (sessions, launch, records, resume, Ctrl-C),
run_sweep / run_allreduce, progress. Imports tasks, frameworks, records, hardware, spec and
(run_sweep) the report; nothing below it imports running."""
