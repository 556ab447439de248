"""The trial order of a multi-arm or repeated run."""

from __future__ import annotations

from aka.run.schedule import Trial, interleaved_schedule


def test_schedule_is_balanced_interleaved_and_reproducible() -> None:
    tasks, arms = ["t1", "t2", "t3"], ["A", "B"]
    trials = interleaved_schedule(tasks, list(arms), 4, seed=7)
    assert sorted((t.task, t.arm, t.repeat) for t in trials) == sorted(
        (task, arm, k) for task in tasks for arm in arms for k in range(1, 5)
    )
    for task in tasks:
        firsts = [next(t.arm for t in trials if (t.task, t.repeat) == (task, k)) for k in range(1, 5)]
        assert sorted(str(arm) for arm in firsts) == ["A", "A", "B", "B"]
        blocks = [i for i, t in enumerate(trials) if t.task == task]
        assert all(blocks[j + 1] - blocks[j] == 1 for j in range(0, len(blocks), 2))
    rounds = [t.repeat for t in trials]
    assert rounds == sorted(rounds)
    assert interleaved_schedule(tasks, list(arms), 4, seed=7) == trials
    assert interleaved_schedule(tasks, list(arms), 4, seed=8) != trials


def test_workspace_labels_keep_a_plain_run_plain() -> None:
    assert Trial("t", None, 1).workspace_label(1) is None
    assert Trial("t", None, 2).workspace_label(3) == "r2"
    assert Trial("t", "noop", 1).workspace_label(1) == "noop__r1"
