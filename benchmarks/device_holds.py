"""How long each step of a run's evaluations held the device, from their logs.

A timed step has the GPU alone and every other step holds it shared (aka.evaluation.device_lock):
with evaluations one after another the GPU's time a trial costs is the sum of its steps' holds;
with several in flight, shared holds of different trials overlap and only the time alone bounds
evaluations per GPU-hour (both are reported). The judge logs when a step's turn came and
when it ended (`evaluation.log` of each trial); this reads every such log under the given run
folders and reports, per step, how long it held the device and how long it waited for it:

    python3 benchmarks/device_holds.py RUN_DIR [RUN_DIR ...] [--json OUT.json]

Steps run side by side (compile and correctness, aka.evaluation.steps) hold the device together:
where their holds overlap, the overlap counts once, so `GPU time a trial` is what the trial kept
timed steps out for. A shared turn that stood stopped while timed steps had the device (the
evaluator's note `STEPS stood stopped S s in N pause(s)`: aka.evaluation.device_lock.SharedTurn)
did not hold it meanwhile: that time is left out. aka.harness steps log their turns; for the
original's task folders the evaluator notes each command's hold and wait (`original STEP command
held the device H s after waiting W s`), and a trial's GPU time is their sum (they run one after
another).

The timed (performance) step's turn is also split into its parts, from the judge's own lines:
loading the baseline, calibrating it alone, loading the candidate, the first case (its pairs
plus what the candidate's first calls cost), the other cases, and the end of the step; where the
judge logged them, also calibration's set-up (inputs, references, warm-up calls) and timed calls,
and each case's set-up before its pairs. That is where a GPU-hour's evaluations are won or lost,
since only this step has the GPU alone.

A timed step whose turn came in phases (the default on a GPU: the device shared while it sets a
side up, alone while it calibrates and times) is noted by the evaluator with how long it held
the device alone and how long it waited between phases: the waits are left out of its hold, the
time alone is its own row (`performance, alone`) and a part of its turn.

The evaluator also notes each turn alone on the wall clock (when it was asked for, how long it
waited, how long it held the device): from every log together, the GPU's time from the first
request to the last turn's end splits into held alone, waited for by a timed step while nobody
held it alone (shared steps finishing or stepping aside), and neither (no timed step ready).

The logs hold the commands' own output too, so a candidate can print lines that look like the
judge's or the evaluator's: these numbers describe benchmark mixes of known candidates, and no
verdict or reward is ever read from them.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

STEPS = ("compile", "correctness", "performance")
LINE = re.compile(r"\+(\d+)ms: (.*)$")
CASE_DONE = re.compile(r"\(\d+ pairs\)$|\(None pairs\)$")
TURN_PARTS = ("load baseline", "calibrate", "load candidate", "first case", "other cases", "finish")
# the judge's finer lines (since session 36): calibration's set-up and calls, each case's set-up before its pairs
CALIBRATED = re.compile(r"^baseline calibrated on \d+ case\(s\): set-up ([0-9.]+) s, calls ([0-9.]+) s")
CASE_SET_UP = re.compile(r": set up in ([0-9.]+) s$")
FINER_PARTS = ("calibrate: set-up", "calibrate: calls", "first case: set-up", "other cases: set-up")
PHASED_PARTS = (
    "baseline first calls (shared)",
    "candidate first calls (shared)",
    "held alone",
    "waited between phases",
)
PAUSED = re.compile(r"^# aka: (\S+) stood stopped ([0-9.]+) s in \d+ pause")
ORIGINAL = re.compile(r"^# aka: original (\w+) command held the device ([0-9.]+) s after waiting ([0-9.]+) s")
# a timed step in phases (the default on a GPU; aka.evaluation.phased_turn.PHASED_NOTE): alone only while it times
PHASED = re.compile(r"^# aka: (\w+) held the device alone ([0-9.]+) s in \d+ phase\(s\), waited ([0-9.]+) s between")
TIMELINE = re.compile(r"^# aka: \w+ turns alone \(asked\+waited\+held, Unix s\): (.*)$")
FIRST_CALLS = re.compile(r"^(baseline|candidate)'s first calls made in ([0-9.]+) s")
# each case's pairs in parts (since session 53): the source's calls, the live pair's release
PAIR_PARTS = re.compile(
    r"^\d+ pairs in ([0-9.]+) s: prepare ([0-9.]+), baseline ([0-9.]+), candidate ([0-9.]+), release ([0-9.]+)$"
)
PAIR_PART_NAMES = ("pairs", "pairs: prepare", "pairs: baseline calls", "pairs: candidate calls", "pairs: release")
# and finer (since session 54): the reference, ablations, each side's call and pause, the check
PAIR_CALL_PARTS = re.compile(r": pair parts: (.*)$")


@dataclass
class StepTimes:
    """One step command's times (ms since its own process started): forked, turn, end."""

    forked: int | None = None
    turn: int | None = None
    end: int | None = None
    paused_ms: int = 0  # stood stopped inside its turn while timed steps had the device
    marks: dict[str, int] = field(default_factory=dict)  # the timed step's milestones (ms)
    cases: list[int] = field(default_factory=list)  # when each timed case finished (ms)
    finer: dict[str, float] = field(default_factory=dict)  # FINER_PARTS, where the judge logged them (s)
    set_ups: list[float] = field(default_factory=list)  # each timed case's set-up before its pairs (s)
    pairs: dict[str, float] = field(default_factory=dict)  # PAIR_PART_NAMES summed over its cases (s)
    alone_s: float | None = None  # a phased turn: how long it held the device alone
    phase_wait_ms: int = 0  # a phased turn: waits between its phases (it held nothing then)

    @property
    def held(self) -> float | None:
        if self.turn is None or self.end is None:
            return None
        return (self.end - self.turn - self.paused_ms - self.phase_wait_ms) / 1000

    @property
    def waited(self) -> float | None:
        return None if self.forked is None or self.turn is None else (self.turn - self.forked) / 1000


@dataclass
class Trial:
    log: Path
    steps: dict[str, StepTimes] = field(default_factory=dict)
    paused_ms: int = 0  # its shared turns' pauses, each once (steps side by side share one)
    original: dict[str, list[float]] = field(default_factory=dict)  # step: [held s, waited s], its commands summed
    turns_alone: list[tuple[float, float, float]] = field(default_factory=list)  # (asked, waited, held), Unix s


def read_log(path: Path) -> Trial:
    """The steps of one evaluation log (`$ python3 harness.py STEP` opens each command's part)."""
    trial, current = Trial(path), None
    for raw in path.read_text(errors="replace").splitlines():
        noted = ORIGINAL.match(raw)
        if noted:
            sums = trial.original.setdefault(noted.group(1), [0.0, 0.0])
            sums[0] += float(noted.group(2))
            sums[1] += float(noted.group(3))
            continue
        timeline = TIMELINE.match(raw)
        if timeline:
            for turn in timeline.group(1).split():
                asked, waited, held = (float(x) for x in turn.split("+"))
                trial.turns_alone.append((asked, waited, held))
            continue
        phased = PHASED.match(raw)
        if phased:
            times = trial.steps.setdefault(phased.group(1), StepTimes())
            times.alone_s = float(phased.group(2))
            times.phase_wait_ms = round(float(phased.group(3)) * 1000)
            trial.paused_ms += times.phase_wait_ms  # inside the step's span, and it held nothing
            continue
        paused = PAUSED.match(raw)
        if paused:
            ms = round(float(paused.group(2)) * 1000)
            trial.paused_ms += ms
            for name in paused.group(1).split("+"):
                trial.steps.setdefault(name, StepTimes()).paused_ms += ms
            continue
        if raw.startswith("$ "):
            words = raw.split()
            current = next((w for w in words if w in STEPS), None)
            if current is not None and current not in trial.steps:
                trial.steps[current] = StepTimes()
            continue
        found = LINE.search(raw)
        if current is None or found is None:
            continue
        ms, message = int(found.group(1)), found.group(2)
        times = trial.steps[current]
        if message == "workers forked":
            times.forked = ms
        elif message == "the step's turn came":
            times.turn = ms
        elif f" {current} (" in message and ("): ok" in message or "): failed" in message):
            times.end = ms
        elif current == "performance":
            for mark in ("baseline loaded", "baseline calibrated", "candidate loaded"):
                if message.startswith(mark):
                    times.marks[mark] = ms
            if CASE_DONE.search(message):
                times.cases.append(ms)
            first_calls = FIRST_CALLS.match(message)
            if first_calls:
                times.finer[f"{first_calls.group(1)} first calls (shared)"] = float(first_calls.group(2))
            calibrated, set_up = CALIBRATED.match(message), CASE_SET_UP.search(message)
            if calibrated:
                times.finer["calibrate: set-up"] = float(calibrated.group(1))
                times.finer["calibrate: calls"] = float(calibrated.group(2))
            if set_up:
                times.set_ups.append(float(set_up.group(1)))
            pair_parts = PAIR_PARTS.match(message)
            if pair_parts:
                for name, value in zip(PAIR_PART_NAMES, pair_parts.groups(), strict=True):
                    times.pairs[name] = times.pairs.get(name, 0.0) + float(value)
            call_parts = PAIR_CALL_PARTS.search(message)
            if call_parts:
                for part in call_parts.group(1).split(", "):
                    name, _, value = part.partition("=")
                    times.pairs[f"pairs: {name}"] = times.pairs.get(f"pairs: {name}", 0.0) + float(value)
    return trial


def turn_parts(times: StepTimes) -> dict[str, float] | None:
    """A paired performance step's turn in parts (seconds), or None where it did not get through
    (a failed load, a step timed alone, a pause inside the turn)."""
    marks = times.marks
    points = [times.turn, marks.get("baseline loaded"), marks.get("baseline calibrated"), marks.get("candidate loaded")]
    if any(p is None for p in points) or not times.cases or times.end is None or times.paused_ms:
        return None
    turn, loaded, calibrated, candidate = (p for p in points if p is not None)
    first, last = times.cases[0], times.cases[-1]
    # each part ends at its mark and starts at the mark before it in time: with AKA_ONE_TURN=1 the
    # baseline is calibrated after the pairs (the candidate loaded first), not between the loads
    ends = sorted(zip((loaded, calibrated, candidate, first, last, times.end), TURN_PARTS, strict=True))
    starts = (turn, *(end for end, _ in ends[:-1]))
    parts = {part: (end - start) / 1000 for start, (end, part) in zip(starts, ends, strict=True)}
    parts = {part: parts[part] for part in TURN_PARTS}
    parts.update(times.finer)
    if times.alone_s is not None:
        parts["held alone"] = times.alone_s
        parts["waited between phases"] = times.phase_wait_ms / 1000
    if times.set_ups:
        parts["first case: set-up"] = times.set_ups[0]
        parts["other cases: set-up"] = sum(times.set_ups[1:])
    parts.update(times.pairs)
    return parts


def gpu_seconds(trial: Trial) -> float | None:
    """The seconds a trial held the device, its steps' holds merged where they overlap. Steps
    forked from the warm parent log on one clock (its start: their `forked` times agree); steps
    exec'd each log on their own, and there the holds are added (they ran one after another), as
    are the original's commands' (noted without pauses)."""
    if trial.original:
        return round(sum(held for held, _ in trial.original.values()), 3)
    steps = [trial.steps.get(s) for s in STEPS]
    if any(t is None or t.turn is None or t.end is None or t.forked is None for t in steps):
        return None
    spans = [(t.turn, t.end) for t in steps if t is not None and t.turn is not None and t.end is not None]
    forked = [t.forked for t in steps if t is not None and t.forked is not None]
    if max(forked) - min(forked) > 5000:  # not one clock
        return (sum(end - start for start, end in spans) - trial.paused_ms) / 1000
    total, reach = 0, None
    for start, end in sorted(spans):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return (total - trial.paused_ms) / 1000  # each pause lies once inside the merged spans


def _merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Seconds two merged interval lists have in common."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def timeline(trials: list[Trial]) -> dict[str, float] | None:
    """The GPU's time from the first turn alone asked for to the last one's end: held alone, waited
    for by a timed step while nobody held it alone, and neither. Turns alone never overlap (the
    lock is exclusive); waits overlap each other and other evaluations' turns."""
    turns = [turn for trial in trials for turn in trial.turns_alone]
    if not turns:
        return None
    alone = _merged([(asked + waited, asked + waited + held) for asked, waited, held in turns])
    waiting = _merged([(asked, asked + waited) for asked, waited, _ in turns])
    span = max(end for _, end in alone + waiting) - min(start for start, _ in alone + waiting)
    held = sum(end - start for start, end in alone)
    waited = sum(end - start for start, end in waiting) - _overlap(waiting, alone)
    return {
        "turns": len(turns),
        "span_s": round(span, 3),
        "alone_s": round(held, 3),
        "waited_not_alone_s": round(waited, 3),
        "neither_s": round(max(0.0, span - held - waited), 3),
        "wait_median_s": round(statistics.median(w for _, w, _ in turns), 3),
    }


def summarize(trials: list[Trial]) -> dict[str, object]:
    """Per step: held and waited seconds (median, mean, p90, count); per trial: the GPU time it
    cost (compile and correctness count once where they ran side by side: their longer hold)."""

    def stats(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        ordered = sorted(values)
        return {
            "n": len(values),
            "median": round(statistics.median(values), 3),
            "mean": round(statistics.mean(values), 3),
            "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 3),
        }

    steps = {}
    for step in STEPS:
        held = [h for t in trials if step in t.steps and (h := t.steps[step].held) is not None]
        waited = [w for t in trials if step in t.steps and (w := t.steps[step].waited) is not None]
        held += [t.original[step][0] for t in trials if step in t.original]
        waited += [t.original[step][1] for t in trials if step in t.original]
        steps[step] = {"held_s": stats(held), "waited_s": stats(waited)}
        alone = [a for t in trials if step in t.steps and (a := t.steps[step].alone_s) is not None]
        if alone:  # phased turns: the part of the hold no other evaluation could use the device
            steps[f"{step}, alone"] = {"held_s": stats(alone), "waited_s": None}
    per_trial = [cost for trial in trials if (cost := gpu_seconds(trial)) is not None]
    turns = [parts for t in trials if "performance" in t.steps and (parts := turn_parts(t.steps["performance"]))]
    timed_turn = {
        part: values
        for part in TURN_PARTS + FINER_PARTS + PHASED_PARTS + PAIR_PART_NAMES
        if (values := stats([parts[part] for parts in turns if part in parts]))
    }
    return {
        "trials": len(trials),
        "steps": steps,
        "gpu_s_per_trial": stats(per_trial),
        "timed_turn_s": timed_turn,
        "timeline": timeline(trials),
    }


def _show(values: dict[str, float] | None, count: bool) -> str:
    if not values:
        return "n/a"
    return f"{values['median']} / {values['mean']} / {values['p90']}" + (f", {values['n']:.0f}" if count else "")


def render(summary: dict[str, object]) -> str:
    lines = [
        f"Evaluation logs read: {summary['trials']}",
        "",
        "| step | held the device, s (median / mean / p90, n) | waited for it, s (median / mean / p90) |",
        "|---|---|---|",
    ]
    steps = summary["steps"]
    assert isinstance(steps, dict)
    for step, row in steps.items():
        held, waited = row["held_s"], row["waited_s"]
        lines.append(f"| {step} | {_show(held, True)} | {_show(waited, False)} |")
    per = summary["gpu_s_per_trial"]
    if isinstance(per, dict):
        lines += [
            "",
            f"GPU time a trial (its steps' holds, merged where they overlapped): median "
            f"{per['median']} s, mean {per['mean']} s over {per['n']} trials: about "
            f"{3600 / per['mean']:.0f} evaluations per GPU-hour where no two trials' holds overlap.",
        ]
    alone = (steps.get("performance, alone") or steps.get("performance") or {}).get("held_s")
    if alone:  # shared holds of different trials overlap; the time alone never does
        lines.append(
            f"The device held alone, mean {alone['mean']} s a timed step: at most about "
            f"{3600 / alone['mean']:.0f} evaluations per GPU-hour however much of the rest overlaps."
        )
    line = summary.get("timeline")
    if isinstance(line, dict):
        span = line["span_s"] or 1.0
        lines.append(
            f"The GPU from the first turn alone asked for to the last one's end ({line['span_s']:.1f} s, "
            f"{line['turns']:.0f} turns alone, each waited for {line['wait_median_s']} s, median): held alone "
            f"{line['alone_s']:.1f} s ({line['alone_s'] / span:.0%}); a timed step waited while nobody held it "
            f"alone {line['waited_not_alone_s']:.1f} s ({line['waited_not_alone_s'] / span:.0%}: shared steps "
            f"finishing or stepping aside); neither {line['neither_s']:.1f} s ({line['neither_s'] / span:.0%}: "
            "no timed step ready)."
        )
    turn = summary.get("timed_turn_s")
    if isinstance(turn, dict) and turn:
        lines += [
            "",
            "The timed step's turn (the GPU alone), in parts, s:",
            "",
            "| part | median / mean / p90, n |",
            "|---|---|",
            *(f"| {part} | {_show(values, True)} |" for part, values in turn.items()),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (their trials' evaluation.log files)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    logs = sorted(p for run in args.runs for p in run.rglob("evaluation.log"))
    trials = [t for t in (read_log(p) for p in logs) if t.steps or t.original]
    summary = summarize(trials)
    sys.stdout.write(render(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
