"""The branch a sweep measured, for `history add`: given, else from the CI's environment, else
from git in the current folder; None when none of them says (such rows count for any branch)."""

from __future__ import annotations

import os
import subprocess

# In order: a pull request's own branch first (GitHub's GITHUB_REF_NAME is "N/merge" there),
# then each CI's branch variable.
CI_VARIABLES = ("GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME",
                "CI_COMMIT_BRANCH", "BUILDKITE_BRANCH", "CIRCLE_BRANCH", "BITBUCKET_BRANCH",
                "DRONE_SOURCE_BRANCH", "BRANCH_NAME", "GIT_BRANCH")


def measured_branch(given: str | None = None, environ: dict[str, str] | None = None,
                    cwd: str | None = None) -> str | None:
    if given:
        return given
    env = os.environ if environ is None else environ
    for name in CI_VARIABLES:
        value = (env.get(name) or "").strip()
        if value:
            # Jenkins' GIT_BRANCH is "origin/main"
            return value.removeprefix("origin/") if name == "GIT_BRANCH" else value
    try:
        out = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True,
                             text=True, timeout=10, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = out.stdout.strip()
    return name if out.returncode == 0 and name and name != "HEAD" else None  # HEAD: detached
