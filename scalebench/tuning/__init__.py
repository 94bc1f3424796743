"""`scalebench tune`: each framework at its best. knobs.py (what a framework may search, the
candidates of a cell), race.py (the race: pure over the figures), run.py (cells -> interleaved
launches through the executor -> race -> confirmation), files.py (tune.json, tuned.toml),
page.py (tune.md, tune.html). Imports running (the executor), tasks, frameworks, analysis,
report (html helpers), records, hardware and spec; nothing below commands imports tuning
except the sweep's reading of tuned.toml (tuning.files)."""
