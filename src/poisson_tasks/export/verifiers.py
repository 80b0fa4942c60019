"""poisson-tasks as a verifiers v1 taskset, played by the null harness (the `verifiers` extra).

Taskset id: `poisson_tasks.export.verifiers` (vf-eval imports the id as a module and takes the one
Taskset and the one Env this module exports). One task is one (arm, seed, attempt): its prompt is the
bundle's messages, its tools are the bundle's tool block served by `export.tools` from the exact
engine, and its verdict is `verifier.verify` on the calls the trace records, copied into
`trace.info` in `finalize` (verifiers does not write `trace.state` to traces.jsonl).

    vf-eval poisson_tasks.export.verifiers --env.taskset.arms '["depth:d3"]' \
        --env.taskset.tasks 5 --model oracle --client.base-url http://127.0.0.1:8000/v1 --no-push

Reward `strict` is 1.0 when the verifier's strict reading passes, on a /leaky arm too; metrics
`arm_pass` (the arm's own strictness: leaky on a /leaky arm), `leaky_pass`, `model_calls`,
`tool_calls` and `outcome` (the label's index in verifier.OUTCOMES; the label itself is
`trace.info["poisson_tasks"]["outcome"]`); `runner.nulltrace.scores` computes them. The `PoissonEnv` pins the null harness on the subprocess
runtime, its chat program run by this interpreter (`export.harness`: nothing fetched at run time),
and caps each rollout at the taskset's turn limit (32, or the pre-registration's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field, model_validator
from verifiers.v1.envs.single_agent import SingleAgentEnvConfig
from verifiers.v1.harnesses.null import NullHarnessConfig
from verifiers.v1.mcp import ToolsetConfig
from verifiers.v1.runtimes import SubprocessConfig

from poisson_tasks.errors import PoissonError
from poisson_tasks.export.tools import LedgerTools
from poisson_tasks.generator import generate
from poisson_tasks.prereg import Slot, derive_seeds, load_preregistration
from poisson_tasks.runner.nulltrace import TRACE_INFO_KEY, scores, verdict_info

TASKSET_ID = "poisson-tasks-verifiers"
# The harness the env runs: verifiers imports a harness id as a module, and the taskset's own
# module exports LockedNullHarness. The config names `null` until the env is built (validating
# this id imports that module, which is still importing this one).
HARNESS_ID = TASKSET_ID
DEFAULT_TURN_LIMIT = 32

ARMS_HELP = (
    'Arm ids to evaluate, e.g. \'["depth:d3", "depth:d5"]\' (knobs-and-arms.md lists them). The '
    "distractor knob (the decoy-tools dial, distractor:r<n>) is experimental: on both calibrated "
    "models it did not make tasks harder, so do not read it as a difficulty setting."
)


class PoissonTaskData(vf.TaskData):
    """One (arm, seed, attempt): enough for the tool server to regenerate the task exactly."""

    arm_id: str
    seed: int
    attempt: int = 0
    task_id: str


class PoissonTask(vf.Task[PoissonTaskData]):
    """A generated task: the bundle's tools per rollout, the verifier's verdict as its score."""

    @classmethod
    def toolsets(cls, config: vf.TaskConfig) -> list[vf.Toolset]:
        return [LedgerTools(ToolsetConfig(runtime=SubprocessConfig()))]

    async def finalize(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        # traces.jsonl keeps trace.info, not trace.state: the verdict goes there.
        data = self.data
        bundle = generate(data.arm_id, data.seed)
        wire = json.loads(trace.model_dump_json(include={"nodes", "stop_condition", "errors"}))
        trace.info[TRACE_INFO_KEY] = verdict_info(bundle, wire)

    @vf.reward
    async def strict(self, trace: vf.Trace) -> float:
        return scores(_verdict(trace))["strict"]

    @vf.metric
    async def episode(self, trace: vf.Trace) -> dict[str, float]:
        return {k: v for k, v in scores(_verdict(trace)).items() if k != "strict"}


def _verdict(trace: vf.Trace) -> dict[str, Any]:
    value = trace.info.get(TRACE_INFO_KEY)
    return value if isinstance(value, dict) else {}


class PoissonTasksetConfig(vf.TasksetConfig):
    """Which tasks: arms x seeds x attempts, or a pre-registration's, or a slots file."""

    arms: list[str] = Field(default_factory=lambda: ["depth:d1"], description=ARMS_HELP)
    tasks: int = Field(5, ge=1, description="Tasks (seeds) per arm, derived from seed_string.")
    seed_string: str = Field(
        "range", description='The seeds\' source string ("range" gives 0, 1, ..., tasks-1).'
    )
    seeds: list[int] | None = Field(None, description="Explicit seeds (overrides tasks).")
    attempts: int = Field(1, ge=1, description="Rows per task, numbered as attempts.")
    split: Literal["eval", "train"] = "eval"
    turn_limit: int = Field(DEFAULT_TURN_LIMIT, ge=1, description="Model calls per episode.")
    preregistration: Path | None = Field(
        None, description="A pre-registration YAML: its arms, seeds, attempts and turn limit."
    )
    slots: Path | None = Field(
        None, description="A JSON file of [arm, seed, attempt] rows (the runner writes one)."
    )

    @model_validator(mode="after")
    def _from_preregistration(self) -> PoissonTasksetConfig:
        if self.preregistration is not None:
            plan = load_preregistration(self.preregistration)
            self.turn_limit = plan.preregistration.design.turn_limit
        return self


def task_slots(config: PoissonTasksetConfig) -> list[Slot]:
    """The (arm, seed, attempt) rows a config names, in order."""
    if config.slots is not None:
        rows = json.loads(config.slots.read_text(encoding="utf-8"))
        return [Slot(str(a), int(s), int(k)) for a, s, k in rows]
    if config.preregistration is not None:
        return load_preregistration(config.preregistration).slots()
    seeds = (
        config.seeds if config.seeds is not None else derive_seeds(config.seed_string, config.tasks)
    )
    arms = [a if "/" in a or config.split == "eval" else f"{a}/{config.split}" for a in config.arms]
    return [Slot(a, s, k) for a in arms for s in seeds for k in range(config.attempts)]


def vf_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A seeded history in verifiers' message form: an assistant's tool calls are flat
    ({id, type, name, arguments}); the null harness sends them in the OpenAI wire form again."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and calls:
            flat = [
                {
                    "id": c["id"],
                    "type": c.get("type", "function"),
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                }
                for c in calls
            ]
            message = {**message, "tool_calls": flat}
        out.append(message)
    return out


class PoissonTaskset(vf.Taskset[PoissonTask, PoissonTasksetConfig]):
    """Generated tasks, one per (arm, seed, attempt)."""

    def load(self) -> list[PoissonTask]:
        tasks = []
        for arm, seed, attempt in task_slots(self.config):
            try:
                bundle = generate(arm, seed)
            except PoissonError as exc:
                raise ValueError(f"--env.taskset.arms: {exc}") from None
            opening = bundle.messages()
            data = PoissonTaskData(
                id=f"{bundle.arm_id}|{seed}|{attempt}",
                name=bundle.task_id,
                system_prompt=bundle.system_prompt,
                prompt=bundle.prompt
                if isinstance(bundle.prompt, str)
                else vf_messages(opening[1:]),
                arm_id=bundle.arm_id,
                seed=seed,
                attempt=attempt,
                task_id=bundle.task_id,
            )
            tasks.append(PoissonTask(data, self.config.task))
        return tasks


class PoissonEnvConfig(SingleAgentEnvConfig):
    """The one agent seat, pinned to the null harness (run from this environment) on the
    subprocess runtime."""

    taskset: PoissonTasksetConfig = PoissonTasksetConfig(id=TASKSET_ID)  # type: ignore[assignment]
    agent: vf.AgentConfig = vf.AgentConfig(
        harness=NullHarnessConfig(id="null"),
        runtime=SubprocessConfig(),
        max_turns=DEFAULT_TURN_LIMIT,
    )


class PoissonEnv(vf.Env[PoissonEnvConfig]):
    """The model sees the task's prompt and its tool block, nothing else (the null harness)."""

    def __init__(self, config: PoissonEnvConfig) -> None:  # type: ignore[override]
        agent = config.agent
        harness_id = agent.harness.id if agent.harness is not None else HARNESS_ID
        if harness_id not in ("null", HARNESS_ID):
            raise ValueError(
                f"--env.agent.harness.id {harness_id}: this taskset runs on the null harness "
                "only (the model must see the task's prompt and tools and nothing else)"
            )
        # `null` names verifiers' own null harness, which fetches its chat program's packages
        # with uv at run time; the taskset's harness runs the same program from this environment.
        if agent.harness is None:
            agent.harness = NullHarnessConfig(id=HARNESS_ID)
        elif agent.harness.id != HARNESS_ID:
            agent.harness = agent.harness.model_copy(update={"id": HARNESS_ID})
        if not isinstance(agent.runtime, SubprocessConfig):
            agent.runtime = SubprocessConfig()
        taskset = config.taskset
        if isinstance(taskset, PoissonTasksetConfig):
            agent.max_turns = taskset.turn_limit
        super().__init__(config)

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await agents.agent.run(task)


__all__ = [
    "PoissonEnv",
    "PoissonEnvConfig",
    "PoissonTask",
    "PoissonTaskData",
    "PoissonTaskset",
    "PoissonTasksetConfig",
]
