"""The one user-facing error type. Raised anywhere, caught only in cli.main (exit code 2)."""


class UserError(Exception):
    """Bad input from the user: a flag, a workload file, a results file. One line, no traceback."""

    exit_code = 2
