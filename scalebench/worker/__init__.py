"""What runs inside a worker: the Comm a framework provides, the timed step, the shared
training loop. Imports models, hardware and spec; never tasks, frameworks, running or reports."""
