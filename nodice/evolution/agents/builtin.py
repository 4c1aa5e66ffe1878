"""The built-in offline operator: parameter mutations and catalog rewrites, learning from the gate.

No network, no key. Each step it takes the best committed version, lists what
it could change (every launch/tiling parameter one step up or down, every
catalog rewrite that applies, and combinations of near misses), weighs each
proposal by its prior, by what the gate said about it before and by the
supervisor's direction, and evaluates the heaviest. Its memory is rebuilt from
the journal, so it survives a resume:

- a proposal the gate rejected (BI violation, incorrect, cheat, error) is
  never proposed again, and a BI rejection of a batch-dependent rewrite makes
  every other batch-dependent rewrite much less attractive;
- a proposal that passed but was slower loses weight and becomes material for
  combinations, and, when it was faster on the workloads of one range of batch
  sizes and slower on the rest, for a batch-bucketed version of itself that
  keeps the step for that range only (see :mod:`buckets`);
- no source is ever evaluated twice.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from nodice.evolution.agents.base import Agent, AgentContext, StepReport
from nodice.evolution.agents.buckets import bucket_mutation, bucket_of
from nodice.evolution.agents.mutations import ParamMutation, lines_run_of, param_mutations
from nodice.evolution.agents.rewrites import CATALOG as REWRITES
from nodice.evolution.journal import Attempt
from nodice.evolution.rundir import KERNEL_FILE
from nodice.evolution.session import GATE_REJECTIONS, Candidate, files_digest

_PARAM_PRIOR = 0.5
# A bucketed step is backed by a measurement (it won on its bucket's workloads): ahead of blind steps.
_BUCKET_PRIOR = 0.7
_REWRITES_BY_KEY = {r.key: r for r in REWRITES}


@dataclass(frozen=True)
class Proposal:
    key: str
    description: str
    source: str
    prior: float
    tags: frozenset[str]


def _param_tags(m: ParamMutation) -> frozenset[str]:
    return tags_of(m.key) | {m.site.kind}


def tags_of(key: str) -> frozenset[str]:
    """Tags of a proposal key, as recorded in the journal (used to rebuild memory)."""
    if key.startswith("combo:"):
        return frozenset({"combine"})
    if key.startswith("bucket:"):
        step = tags_of("param:" + key.removeprefix("bucket:").split("@")[0])
        return step | {"bucket", "batch_dependent"}
    if key in _REWRITES_BY_KEY:
        r = _REWRITES_BY_KEY[key]
        return frozenset({"rewrite", *(("batch_dependent",) if r.batch_dependent else ())})
    if key.startswith("param:"):
        name = key.removeprefix("param:").split("=")[0].split("#")[0]
        kind = "cap" if name.startswith("cap(") else "param"
        tags = {"param", name, kind}
        if "BLOCK" in name.upper() or kind == "cap":
            tags.add("tile")
        return frozenset(tags)
    return frozenset()


class Memory:
    """What the gate and the benchmark said about earlier proposals."""

    def __init__(self) -> None:
        self.banned: dict[str, str] = {}
        self.slower: Counter[str] = Counter()
        self.tag_penalty: Counter[str] = Counter()
        self.near_misses: list[str] = []
        self.near_miss_scores: dict[str, list[dict[str, Any]]] = {}
        self.seen_sources: set[str] = set()
        self.recent_tags: list[frozenset[str]] = []

    def record(self, key: str, attempt: Attempt) -> None:
        self.seen_sources.add(attempt.files_sha)
        tags = tags_of(key)
        self.recent_tags = [*self.recent_tags[-4:], tags]
        if attempt.outcome in GATE_REJECTIONS:
            self.banned[key] = attempt.outcome
            if attempt.outcome == "bi_violation" and "batch_dependent" in tags:
                self.tag_penalty["batch_dependent"] += 1
        elif attempt.outcome == "slower":
            self.slower[key] += 1
            if key.startswith("param:") and key not in self.near_misses:
                self.near_misses.append(key)
            if key.startswith("param:"):
                self.near_miss_scores[key] = attempt.scores

    def weight(self, p: Proposal) -> float:
        if p.key in self.banned:
            return 0.0
        w = 0.5 ** self.slower[p.key]
        for tag in p.tags:
            w *= 0.25 ** self.tag_penalty[tag]
        return w


def _focus_factor(p: Proposal, focus: tuple[str, ...], recent: list[frozenset[str]]) -> float:
    f = 1.0
    for tag in focus:
        if tag == "no_batch_dependence" and "batch_dependent" in p.tags:
            return 0.0
        if tag == "small_steps":
            f *= 2.0 if "param" in p.tags else 0.5
        elif tag == "explore":
            touched = set().union(*recent[-3:]) if recent else set()
            f *= 0.3 if (p.tags - {"param"}) & touched else 1.5
        elif tag in p.tags:
            f *= 4.0 if tag == "combine" else 3.0
    return f


class BuiltinAgent(Agent):
    """Offline operator: mutate, rewrite, remember what the gate refused."""

    name = "builtin"

    def __init__(self, rng_seed: int = 0) -> None:
        super().__init__()
        self.rng_seed = rng_seed
        self.memory = Memory()

    def start(self, ctx: AgentContext) -> None:
        self.memory = Memory()
        for a in ctx.session.journal.attempts():
            self.memory.seen_sources.add(a.files_sha)
            if a.agent == self.name:
                self.memory.record(a.label, a)

    # ---- proposals --------------------------------------------------------------
    def proposals(
        self, source: str, task: str, best_scores: list[dict[str, Any]] | None = None
    ) -> list[Proposal]:
        out: list[Proposal] = []
        for r in REWRITES:
            new = r.apply(source, task)
            if new is not None and new != source:
                tags = {"rewrite", *(("batch_dependent",) if r.batch_dependent else ())}
                out.append(Proposal(r.key, r.description, new, r.prior, frozenset(tags)))
        # Only what the benchmarked path can reach: a parameter on a line no workload ran is noise.
        singles = param_mutations(source, lines_run_of(best_scores))
        for m in singles:
            out.append(Proposal(m.key, m.description, m.source, _PARAM_PRIOR, _param_tags(m)))
        out.extend(self._combinations(source, singles))
        out.extend(self._bucketed(source, singles, best_scores or []))
        return out

    def _bucketed(
        self, source: str, singles: list[ParamMutation], best_scores: list[dict[str, Any]]
    ) -> list[Proposal]:
        """Near misses that won on one range of batch sizes, applied to that range only."""
        by_key = {m.key: m for m in singles}
        out: list[Proposal] = []
        for key in self.memory.near_misses:
            step, scores = by_key.get(key), self.memory.near_miss_scores.get(key)
            bucket = bucket_of(scores, best_scores) if step and scores and best_scores else None
            mutation = bucket_mutation(source, step, bucket) if step and bucket else None
            if mutation is not None:
                tags = tags_of(mutation.key)
                out.append(Proposal(mutation.key, mutation.description, mutation.source, _BUCKET_PRIOR, tags))
        return out

    def _combinations(self, source: str, singles: list[ParamMutation]) -> list[Proposal]:
        """Pairs of near misses (passed, not faster alone) applied together on the best version."""
        by_key = {m.key: m for m in singles}
        misses = [k for k in self.memory.near_misses if k in by_key]
        out: list[Proposal] = []
        for i, a in enumerate(misses):
            for b in misses[i + 1 :]:
                ma = by_key[a]
                second = [m for m in param_mutations(ma.source) if m.key == b]
                if not second or by_key[b].site.name == ma.site.name:
                    continue
                key = f"combo:{a.removeprefix('param:')}+{b.removeprefix('param:')}"
                desc = f"{ma.description}; {by_key[b].description}"
                out.append(Proposal(key, desc, second[0].source, _PARAM_PRIOR, frozenset({"combine"})))
        return out

    def choose(
        self,
        proposals: list[Proposal],
        files: dict[str, str],
        attempt_no: int,
        exclude: frozenset[str] = frozenset(),
    ) -> Proposal | None:
        rng = random.Random(self.rng_seed * 1_000_003 + attempt_no)
        focus = self.direction.focus if self.direction else ()
        best: tuple[float, Proposal] | None = None
        for p in proposals:
            digest = files_digest({**files, KERNEL_FILE: p.source})
            if digest in self.memory.seen_sources or digest in exclude:
                continue
            w = p.prior * self.memory.weight(p) * _focus_factor(p, focus, self.memory.recent_tags)
            if w <= 0:
                continue
            score = w * (1.0 + 0.3 * rng.random())
            if best is None or score > best[0]:
                best = (score, p)
        return best[1] if best else None

    def choose_many(
        self,
        proposals: list[Proposal],
        files: dict[str, str],
        attempt_no: int,
        n: int,
        exclude: frozenset[str] = frozenset(),
    ) -> list[Proposal]:
        """Up to ``n`` distinct proposals, heaviest first, each drawn as :meth:`choose` would draw it."""
        chosen: list[Proposal] = []
        taken: set[str] = set(exclude)
        for k in range(n):
            p = self.choose(proposals, files, attempt_no + k, frozenset(taken))
            if p is None:
                break
            chosen.append(p)
            taken.add(files_digest({**files, KERNEL_FILE: p.source}))
        return chosen

    # ---- step ---------------------------------------------------------------------
    def step(self, ctx: AgentContext) -> StepReport:
        session = ctx.session
        if session.workers > 1:
            return self._step_in_flight(ctx, session.workers)
        files = session.best_files()
        source = files.get(KERNEL_FILE, "")
        best = session.best()
        proposals = self.proposals(source, ctx.config.task, best.scores if best else None)
        proposal = self.choose(proposals, files, session.evaluations_done())
        if proposal is None:
            return StepReport(0, "no untried proposal left", exhausted=True)
        candidate = {**files, KERNEL_FILE: proposal.source}
        session.run.write_workspace(candidate)
        attempt = session.evaluate(
            agent=self.name,
            label=proposal.key,
            description=proposal.description,
            files=candidate,
            commit_if_eligible=True,
        )
        self.memory.record(proposal.key, attempt)
        if attempt.outcome != "committed":
            session.run.write_workspace(session.best_files())
        return StepReport(1, f"{proposal.key}: {attempt.outcome}")

    def _step_in_flight(self, ctx: AgentContext, width: int) -> StepReport:
        """Keep ``width`` proposals in flight; record those that finish (each through the one commit rule).

        New proposals are drawn on the best version committed so far, never a source already in flight.
        """
        session = ctx.session
        flying = session.in_flight
        left = session.evaluations_left()
        room = width - len(flying) if left is None else min(width, left) - len(flying)
        started = 0
        if room > 0 and not ctx.must_stop():
            files = session.best_files()
            source = files.get(KERNEL_FILE, "")
            exclude = frozenset(files_digest(c.files) for c in flying)
            attempt_no = session.evaluations_done() + len(flying)
            best = session.best()
            proposals = self.proposals(source, ctx.config.task, best.scores if best else None)
            for p in self.choose_many(proposals, files, attempt_no, room, exclude):
                session.start(
                    Candidate({**files, KERNEL_FILE: p.source}, self.name, p.key, p.description, True, True)
                )
                started += 1
        if not started and not flying:
            return StepReport(0, "no untried proposal left", exhausted=True)
        attempts = session.finish_next()
        for attempt in attempts:
            self.memory.record(attempt.label, attempt)
        session.run.write_workspace(session.best_files())
        return StepReport(len(attempts), ", ".join(f"{a.label}: {a.outcome}" for a in attempts))
