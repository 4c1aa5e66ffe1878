"""The knob search: the built-in operator's sweep of a kernel's declared knobs with Optuna's TPE.

``nodice evolve TASK --agent knobs --seed KERNEL.py`` searches the pins, table entries and launch
options the best version declares in its ``KNOBS`` (:mod:`knobs`). Each step:

1. the proposer is rebuilt from the journal: every knob setting evaluated so far is a finished
   trial (its geomean when it was timed, 0 when it was rejected or changed bits), the best
   version's own setting one more; Optuna's TPE sampler, seeded with ``--rng-seed`` and the
   number of trials, proposes the next setting. So a resumed run proposes exactly what an
   uninterrupted one would, and a setting already evaluated (or whose source was) is never
   proposed again;
2. the setting is written into the best version's source and judged on the normal route: the
   whole gate, then its outputs compared bit for bit with the best version's on the benchmark's
   workloads (stage ``same_bits``), and only when they match, the benchmark;
3. the commit rule decides, as for every other edit.

A setting that changes bits is recorded as ``bits_differ`` and not timed: a knob search looks for
a faster way to compute the same outputs, and a kernel with other outputs is a different kernel.
The exception is declared: a knob in the kernel's ``ORDER_KNOBS`` reorders a sum by design (a split
size, a key tile, a chunk length), so a setting that changes one of them from the best version's
is judged as any new kernel is (the whole gate: reference correctness and batch invariance) and
timed without the bitwise comparison; once committed, its bits are the ones later settings must
keep. Every step is one evaluation of the budget and one journal entry, and the supervisor
watches them as it watches any other agent's.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from nodice.evolution.agents.base import Agent, AgentContext, AgentError, StepReport
from nodice.evolution.agents.knobs import (
    Knob,
    KnobError,
    Setting,
    active,
    apply_setting,
    canonical,
    current_setting,
    parse_label,
    read_knobs,
    restrict,
    setting_label,
)
from nodice.evolution.rundir import KERNEL_FILE
from nodice.evolution.session import files_digest

if TYPE_CHECKING:
    from nodice.evolution.journal import Attempt

# Outcomes of a timed setting: its geomean is what it scored.
_TIMED = ("committed", "eligible", "committing", "slower")
# TPE proposals to draw before falling back to a seeded draw of untried settings.
_TPE_DRAWS = 32
_RANDOM_DRAWS = 2000


def _key(setting: Setting) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, (type(v).__name__, v)) for k, v in setting.items()))


def journal_trials(attempts: Iterable[Attempt], knobs: list[Knob]) -> list[tuple[Setting, float]]:
    """Every knob setting the journal holds, with its geomean (0 when it was not timed)."""
    names = {k.name for k in knobs}
    out = []
    for a in attempts:
        setting = parse_label(a.label)
        if setting is None or set(setting) != names:
            continue
        out.append((setting, a.geomean if a.outcome in _TIMED else 0.0))
    return out


def settings_count(knobs: list[Knob]) -> int:
    """How many distinct settings the knobs have (an inactive knob's choices count once)."""
    parents = [k for k in knobs if any(p == k.name for other in knobs for p, _ in other.when)]
    others = [k for k in knobs if k not in parents]
    fixed = {k.name: k.current for k in knobs}
    heads = {
        _key(canonical(knobs, fixed | dict(zip([p.name for p in parents], values, strict=True))))
        for values in itertools.product(*(p.choices for p in parents))
    }
    total = 0
    for head in heads:
        setting = {name: value for name, (_, value) in head}
        on = active(knobs, setting)
        total += math.prod(len(k.choices) for k in others if k.name in on)
    return total


def propose(
    knobs: list[Knob],
    trials: list[tuple[Setting, float]],
    seed: int,
    seen: Callable[[Setting], bool] = lambda s: False,
) -> Setting | None:
    """The next setting to try: TPE over ``trials`` (seeded by ``seed`` and their number), never
    one of them nor one ``seen`` says was evaluated; None when every setting was.

    Settings are canonical (:func:`knobs.canonical`): a knob its ``KNOB_WHEN`` conditions leave
    inactive keeps the source's value and is no parameter of the trial."""
    try:
        import optuna
        from optuna.distributions import BaseDistribution, CategoricalDistribution
        from optuna.samplers import TPESampler
        from optuna.trial import TrialState, create_trial
    except ImportError:
        raise AgentError("the knob search needs Optuna: pip install 'nodice[search]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space: dict[str, BaseDistribution] = {k.name: CategoricalDistribution(list(k.choices)) for k in knobs}
    run_seed = seed * 1_000_003 + len(trials)
    study = optuna.create_study(direction="maximize", sampler=TPESampler(seed=run_seed))
    tried: dict[tuple[tuple[str, Any], ...], float] = {}
    for setting, value in trials:
        if not all(setting[k.name] in k.choices for k in knobs):
            continue
        setting = canonical(knobs, setting)
        if _key(setting) not in tried:
            on = active(knobs, setting)
            study.add_trial(
                create_trial(
                    params={n: v for n, v in setting.items() if n in on},
                    distributions={n: d for n, d in space.items() if n in on},
                    value=value,
                )
            )
            tried[_key(setting)] = value
    if len(tried) >= settings_count(knobs):
        return None

    def fresh(setting: Setting) -> bool:
        return _key(setting) not in tried and not seen(setting)

    for _ in range(_TPE_DRAWS):
        trial = study.ask()
        drawn: Setting = {}
        for k in knobs:  # a knob follows the knobs its conditions name
            if all(drawn[p] in values and p in trial.params for p, values in k.when):
                drawn[k.name] = trial.suggest_categorical(k.name, list(k.choices))
            else:
                drawn[k.name] = k.current
        setting = canonical(knobs, drawn)
        if fresh(setting):
            return setting
        # Told what it already scored, so the model does not draw it again at once.
        known = tried.get(_key(setting))
        study.tell(trial, known, state=TrialState.COMPLETE if known is not None else TrialState.FAIL)
    rng = random.Random(run_seed)
    for _ in range(_RANDOM_DRAWS):
        setting = canonical(knobs, {k.name: rng.choice(k.choices) for k in knobs})
        if fresh(setting):
            return setting
    return None


class KnobSearchAgent(Agent):
    """The built-in operator's knob mode: TPE over the declared knobs, bitwise-checked against the best
    (except where a declared order knob changes)."""

    name = "knobs"

    def __init__(self, rng_seed: int = 0, only: list[str] | None = None) -> None:
        super().__init__()
        self.rng_seed = rng_seed
        # ``--knob NAME``: the knobs searched; the others keep the best version's values.
        self.only = list(only or [])

    def step(self, ctx: AgentContext) -> StepReport:
        session = ctx.session
        files = session.best_files()
        source = files.get(KERNEL_FILE, "")
        try:
            knobs = read_knobs(source)
            if knobs and self.only:
                knobs = restrict(knobs, self.only)
        except KnobError as exc:
            raise AgentError(f"{KERNEL_FILE}: {exc.line()}") from None
        if not knobs:
            raise AgentError(
                f"{KERNEL_FILE} declares no KNOBS, so the knob search has nothing to set "
                "(see docs/search.md; start from a kernel that declares them with --seed FILE)"
            )
        attempts = session.journal.attempts()
        trials = journal_trials(attempts, knobs)
        best = session.best()
        if best is not None:  # the best version's own setting is a trial too
            trials.append((current_setting(knobs), best.geomean))
        evaluated = {a.files_sha for a in attempts}

        def seen(setting: Setting) -> bool:
            return files_digest({**files, KERNEL_FILE: apply_setting(source, knobs, setting)}) in evaluated

        setting = propose(knobs, trials, self.rng_seed, seen)
        if setting is None:
            return StepReport(0, "every setting of the declared knobs was evaluated", exhausted=True)
        changed = {n: v for n, v in setting.items() if v != current_setting(knobs)[n]}
        reordered = [k.name for k in knobs if k.reorders and k.name in changed]
        description = "knobs " + ", ".join(f"{n}={v!r}" for n, v in changed.items())
        if reordered:
            description += (
                f" (reorders a sum through {', '.join(reordered)}: judged by the gate, not bit for bit)"
            )
        candidate = {**files, KERNEL_FILE: apply_setting(source, knobs, setting)}
        session.run.write_workspace(candidate)
        attempt = session.evaluate(
            agent=self.name,
            label=setting_label(setting),
            description=description,
            files=candidate,
            commit_if_eligible=True,
            same_bits_as=None if reordered else files,
        )
        if attempt.outcome != "committed":
            session.run.write_workspace(session.best_files())
        return StepReport(1, f"{attempt.label}: {attempt.outcome}")
