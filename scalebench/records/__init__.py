"""Recording: the record schema every task shares (schema), validation and the JSONL store
(results), files written whole (atomic). Imports spec and the task registry (to validate a
record by its kind); never running, analysis or reports."""
