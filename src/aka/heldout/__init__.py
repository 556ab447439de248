"""Held-out cases after a run: `aka heldout RUN` (post_run) and the rule-generated cases of tasks
whose authors wrote none (generate)."""
