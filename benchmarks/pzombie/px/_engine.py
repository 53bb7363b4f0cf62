"""Telemetry, the ACTIVE_MANIFOLD operators, and one prompt's run through the activation taps.

Per forward pass (step 0 is the prefill, then one per decode step) the engine

1. reads the last-position hidden vector at the prelude boundary (output of
   decoder layer ``recur_start - 1``) and computes its plain kurtosis;
2. standardises it against the calibrator (z_k) and lets the selector turn
   z_k into a layer window ``[recur_start, end)``, a hub and a loop count;
3. at the window's last layer (output h) applies the loop: the position-wise
   feed-forward sub-blocks of the layers [hub, end), ``loops`` times, giving
   loop(h); phi is the cosine similarity of the last-position vectors of
   loop(h) and h (how little the recursion moved the state), standardised
   against the calibrator (z_phi); (z_k, z_phi, z_TD) are routed to zone
   weights;
4. under ACTIVE_MANIFOLD only, replaces the window's output by the
   phi-weighted blend ``phi' * loop(h) + (1 - phi') * h`` (phi' = phi clipped
   to [0, 1]) for every position of the forward pass; the final layers then
   run unchanged.

Under BASELINE the same telemetry and routing run as pure observers: the taps
return nothing, so the logits are the unpatched model's, bit for bit.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from models import CapabilityError, GenerationSettings, LanguageModel, TapEvent

from ._calibrator import AutoCalibrator
from ._config import ACTIVE_MANIFOLD, PRESETS, PxConfig, PxError
from ._router import Routing, route, zone_entropy

#: Codes of a prompt that produced no measurement; the protocol counts them, nothing crashes.
PX_ERROR_CODES = (
    "timeout",  # the prompt's child process ran past the timeout and was killed
    "child_crashed",  # the child process died without sending a record (signal, out of memory)
    "backend_error",  # the model or the engine raised while running this prompt
)


# -- telemetry ---------------------------------------------------------------------------------------


def active_stream(hidden: Any) -> Any:
    """The [batch, positions, hidden] residual stream of a layer output.

    Gemma 3n layers carry several AltUp streams, [streams, batch, positions, hidden]; stream 0 is the active
    one (``altup_active_idx``), the one its final norm reads.
    """
    if hidden.dim() == 3:
        return hidden
    if hidden.dim() == 4:
        return hidden[0]
    raise CapabilityError(f"the PX-Engine reads [batch, positions, hidden] layer outputs; got shape {tuple(hidden.shape)}")


def last_vector(hidden: Any) -> Any:
    """The newest position's hidden vector of batch row 0 (of the active stream)."""
    return active_stream(hidden)[0, -1]


def kurtosis(vector: Any) -> float:
    """Plain (not excess) kurtosis mean((h - mu)^4) / var^2, unbiased variance, in float32."""
    v = vector.float()
    mu = v.mean()
    var = v.var(unbiased=True)
    return float(((v - mu) ** 4).mean() / (var * var))


def cosine(a: Any, b: Any) -> float:
    """Cosine similarity of two vectors in float32 (0 when either is the zero vector)."""
    a, b = a.float(), b.float()
    denom = float(a.norm() * b.norm())
    return float((a * b).sum()) / denom if denom > 0 else 0.0


def torch_cat(parts: Sequence[Any]) -> Any:
    import torch

    return torch.cat(list(parts), dim=0)


def token_diversity(token_ids: Sequence[int]) -> float:
    """Distinct over total token ids (of the chat-templated input, special tokens included)."""
    return len(set(token_ids)) / len(token_ids) if token_ids else 0.0


# -- the selector and the loop ---------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """Where ACTIVE_MANIFOLD recurses in one step: layers [hub, end) looped ``loops`` times."""

    start: int  # window start = recur_start
    end: int  # window end (exclusive): the window's output is that of layer end - 1
    hub: int  # first layer of the looped segment, start <= hub < end
    loops: int  # how many times the segment's feed-forward sub-blocks are re-applied


def select(z: float, num_layers: int, config: PxConfig) -> Selection:
    """Window length clamp(window_base + round(z), window_min, window_max) within the layers left before the
    final layers; hub at start + floor(sigmoid(z) * length); loops clamp(1 + floor(|z|), 1, max_loops)."""
    start = config.recur_start
    room = num_layers - config.final_layers - start
    if room < 1:
        raise PxError(f"recur_start {start} and final_layers {config.final_layers} leave no window in {num_layers} layers")
    zc = max(-50.0, min(50.0, z))
    length = max(1, min(room, config.window_max, max(config.window_min, config.window_base + round(zc))))
    hub = start + min(length - 1, int(length / (1.0 + math.exp(-zc))))
    loops = max(1, min(config.max_loops, 1 + math.floor(abs(zc))))
    return Selection(start, start + length, hub, loops)


def _feed_forward(layer: Any, x: Any) -> Any:
    """One residual feed-forward sub-block of a decoder layer (Gemma 3 sandwich norms, or Llama-style)."""
    if hasattr(layer, "pre_feedforward_layernorm") and hasattr(layer, "post_feedforward_layernorm"):
        return x + layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(x)))
    return x + layer.mlp(layer.post_attention_layernorm(x))


def decoder_layers(model: LanguageModel) -> Any:
    """The decoder layers the taps hook (``.model.layers``, or ``.model.language_model.layers`` for wrappers)."""
    inner = getattr(getattr(model, "model", None), "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        layers = getattr(getattr(inner, "language_model", None), "layers", None)
    if layers is None:
        raise CapabilityError(f"{type(model).__name__} exposes no decoder layers; the PX-Engine needs a local transformers model")
    for layer in layers:
        if not hasattr(layer, "mlp") or not (hasattr(layer, "pre_feedforward_layernorm") or hasattr(layer, "post_attention_layernorm")):
            raise CapabilityError(f"{type(layer).__name__} has no feed-forward sub-block the ACTIVE_MANIFOLD loop can re-apply")
    return layers


# -- one prompt --------------------------------------------------------------------------------------


@dataclass
class StepTrace:
    """Telemetry of one forward pass."""

    step: int
    kurtosis: float | None = None
    phi: float | None = None
    z_kurtosis: float = 0.0
    z_phi: float = 0.0
    selection: Selection | None = None
    routing: Routing | None = None


class Tracer:
    """The tap callback of one prompt: telemetry, routing and (ACTIVE_MANIFOLD) the replaced window output."""

    def __init__(self, calibrator: AutoCalibrator, *, preset: str, z_td: float, num_layers: int, layers: Any,
                 observe: bool):
        self.calibrator = calibrator
        self.config = calibrator.config
        self.preset = preset
        self.z_td = z_td
        self.num_layers = num_layers
        self.layers = layers
        self.observe = observe  # update the (copy of the) online statistics at every step
        self.steps: list[StepTrace] = []

    def __call__(self, event: TapEvent) -> Any:
        boundary = self.config.recur_start - 1
        if event.layer == boundary:
            vector = last_vector(event.hidden)
            value = kurtosis(vector)
            trace = StepTrace(step=event.step, kurtosis=value if math.isfinite(value) else None)
            if self.observe:
                self.calibrator.observe_step(value, None)
            trace.z_kurtosis = self.calibrator.z_kurtosis(value)
            trace.selection = select(trace.z_kurtosis, self.num_layers, self.config)
            self.steps.append(trace)
            return None
        if not self.steps or self.steps[-1].step != event.step:
            return None  # a layer before the boundary or a forward without telemetry
        trace = self.steps[-1]
        if trace.routing is not None or event.layer != trace.selection.end - 1:
            return None
        hidden = active_stream(event.hidden)
        # The loop is position-wise: an observer needs only the newest position for phi.
        looped = hidden if self.preset == ACTIVE_MANIFOLD else hidden[:, -1:]
        for _ in range(trace.selection.loops):
            for index in range(trace.selection.hub, trace.selection.end):
                looped = _feed_forward(self.layers[index], looped)
        phi = cosine(last_vector(looped), last_vector(hidden))
        trace.phi = phi if math.isfinite(phi) else None
        if self.observe and trace.phi is not None:
            self.calibrator.state.phi.add(phi)
        trace.z_phi = self.calibrator.z_phi(trace.phi)
        cal = self.calibrator.calibration()
        trace.routing = route(trace.z_kurtosis, trace.z_phi, self.z_td, cal.temperature, cal.blend, self.config)
        if self.preset != ACTIVE_MANIFOLD:
            return None  # BASELINE: observed only; the layer's output stays the model's own
        weight = min(1.0, max(0.0, trace.phi if trace.phi is not None else 0.0))
        blended = weight * looped + (1.0 - weight) * hidden
        if event.hidden.dim() == 4:  # replace the active AltUp stream only
            return torch_cat((blended[None], event.hidden[1:]))
        return blended


@dataclass
class PxRecord:
    """One measured (or calibration) prompt: routing metrics, telemetry sequences, the generation, or an error."""

    SCHEMA_VERSION = 1

    prompt_id: str
    preset: str
    phase: str  # "measured" or "calibration"
    isolation: str  # "fork", "spawn" or "inprocess"
    error: str | None = None  # one of PX_ERROR_CODES, None when measured
    error_detail: str | None = None
    zones: list[str] = field(default_factory=list)
    zone_weights_last: dict[str, float] | None = None  # weights at the last generation step: the metric
    zone_weights_mean: dict[str, float] | None = None  # mean over steps (recorded, not used by the rules)
    zone_entropy: float | None = None  # H in bits of zone_weights_last
    zone_entropy_of_mean: float | None = None  # H in bits of zone_weights_mean
    dominant_zone: str | None = None  # argmax of zone_weights_last
    token_diversity: float | None = None  # distinct / total ids of the chat-templated input
    input_tokens: int | None = None
    distinct_input_tokens: int | None = None
    input_token_ids: list[int] = field(default_factory=list)  # the chat-templated input TD is computed from
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    new_tokens: int = 0
    finish_reason: str = "none"  # "stop", "length", "none" (no tokens asked), "error"
    steps: int = 0  # forward passes with telemetry (prefill + decode steps)
    kurtosis: list[float | None] = field(default_factory=list)  # per step, prelude boundary
    phi: list[float | None] = field(default_factory=list)  # per step
    z_kurtosis: list[float] = field(default_factory=list)
    z_phi: list[float] = field(default_factory=list)
    z_td: float | None = None
    fallback: list[bool] = field(default_factory=list)  # per step: low kurtosis mass, phi-only weights
    selections: list[list[int]] = field(default_factory=list)  # per step: [start, end, hub, loops]
    loops_run: int = 0  # sum of loop counts actually applied (0 under BASELINE)
    temperature: float | None = None
    blend: float | None = None
    seconds: float = 0.0  # wall time of the generation
    pid: int = 0  # the process that computed this record
    start_state_sha256: str = ""  # hash of the calibrator state the prompt started from

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema_version"] = self.SCHEMA_VERSION
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PxRecord:
        data = dict(data)
        data.pop("schema_version", None)
        return cls(**data)


def _finite(value: float) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def run_one(
    model: LanguageModel,
    prompt_id: str,
    text: str,
    calibrator: AutoCalibrator,
    *,
    preset: str,
    settings: GenerationSettings,
    phase: str,
    isolation: str,
    state_sha256: str,
    empty_cache: bool = False,
) -> PxRecord:
    """Generate for one chat prompt under ``preset`` with the engine tapped in; the taps are gone afterwards.
    ``empty_cache``: release the CUDA allocator's cached blocks first (``torch.cuda.empty_cache()``)."""
    if preset not in PRESETS:
        raise PxError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    config = calibrator.config
    layers = decoder_layers(model)
    if config.recur_start >= len(layers):
        raise PxError(f"recur_start {config.recur_start} is not inside the model's {len(layers)} decoder layers")
    rendered = model.render_chat([{"role": "user", "content": text}])
    ids = model.encode(rendered)
    td = token_diversity(ids)
    calibrating = phase == "calibration"
    tracer = Tracer(calibrator, preset=preset, z_td=calibrator.z_td(td), num_layers=len(layers), layers=layers,
                    observe=calibrating or config.online_updates)
    # z_TD of a calibration prompt is taken before its own diversity joins the statistics.
    if calibrating:
        calibrator.observe_prompt(td)
    if empty_cache:
        import torch

        torch.cuda.empty_cache()
    started = time.perf_counter()
    with model.taps(tracer, layers=range(config.recur_start - 1, len(layers)), modify=preset == ACTIVE_MANIFOLD):
        response = model.generate([rendered], settings)[0]
    seconds = time.perf_counter() - started
    steps = [s for s in tracer.steps if s.routing is not None]
    zones = list(config.zones)
    record = PxRecord(prompt_id=prompt_id, preset=preset, phase=phase, isolation=isolation, zones=zones,
                      token_diversity=td, input_tokens=len(ids), distinct_input_tokens=len(set(ids)), input_token_ids=list(ids),
                      text=response.text, token_ids=list(response.token_ids), new_tokens=len(response.token_ids),
                      finish_reason=response.finish_reason, seconds=seconds, pid=os.getpid(),
                      start_state_sha256=state_sha256, z_td=tracer.z_td)
    if not steps:
        record.error, record.error_detail = "backend_error", "no forward pass reached the window's last layer"
        return record
    last = steps[-1].routing.weights
    mean = [sum(s.routing.weights[i] for s in steps) / len(steps) for i in range(len(zones))]
    record.zone_weights_last = dict(zip(zones, last))
    record.zone_weights_mean = dict(zip(zones, mean))
    record.zone_entropy = zone_entropy(last)
    record.zone_entropy_of_mean = zone_entropy(mean)
    record.dominant_zone = zones[max(range(len(zones)), key=lambda i: (last[i], -i))]
    record.steps = len(steps)
    record.kurtosis = [s.kurtosis for s in steps]
    record.phi = [s.phi for s in steps]
    record.z_kurtosis = [s.z_kurtosis for s in steps]
    record.z_phi = [s.z_phi for s in steps]
    record.fallback = [s.routing.fallback for s in steps]
    record.selections = [[s.selection.start, s.selection.end, s.selection.hub, s.selection.loops] for s in steps]
    record.loops_run = sum(s.selection.loops for s in steps) if preset == ACTIVE_MANIFOLD else 0
    record.temperature = steps[-1].routing.temperature
    record.blend = steps[-1].routing.blend
    return record


def generation_settings(preset: str, max_new_tokens: int, config: PxConfig) -> GenerationSettings:
    """Greedy; stop on config.stop_tokens besides eos; ACTIVE_MANIFOLD adds the repetition penalty and no-repeat size."""
    if preset not in PRESETS:
        raise PxError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    active = preset == ACTIVE_MANIFOLD
    return GenerationSettings(
        max_new_tokens=max_new_tokens,
        stop=tuple(config.stop_tokens),
        repetition_penalty=config.repetition_penalty if active else 1.0,
        no_repeat_ngram_size=config.no_repeat_ngram_size if active else 0,
        use_cache=config.use_cache,
    )

