"""Analysis of records: statistics, per-configuration rows and paired efficiency (aggregate),
the loss breakdown, the scaling model, MFU and compare's verdicts. Pure over records: never
imports frameworks' packages, launchers, running, tracking or reports."""
