"""A model as kvplan sees it: its list of layer specs plus its weights, counted by role.

Weights are counted by role (embedding, attention, MLP, routed experts, ...) because roles are
what quantization schemes and tensor parallelism treat differently: AWQ packs linear layers but
leaves embeddings and norms in 16 bits; a router and an MLA down-projection are replicated on
every rank while the rest is split.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.model.checkpoint_kv import CheckpointKV
from kvplan.model.layers import LayerSpec, unwindowed
from kvplan.model.weight_formats import BlockShape


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts by role, whole model (all layers, all experts)."""

    embedding: int = 0  # token (and learned position) embeddings
    lm_head: int = 0  # 0 when tied to the embedding
    attention: int = 0  # attention / mixer projections: linear, quantizable
    mlp: int = 0  # dense MLP projections: linear, quantizable
    experts: int = 0  # routed experts, all of them: linear, quantizable (except expert_biases)
    experts_active: int = 0  # routed expert parameters one token uses
    shared_experts: int = 0  # always-on experts: linear, quantizable
    router: int = 0  # expert gates: kept in 16 bits, replicated
    other: int = 0  # norms, biases, small state tensors: kept in 16 bits
    replicated: int = 0  # linear parameters tensor parallelism cannot split (MLA down-projections)
    num_experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0
    num_moe_layers: int = 0
    expert_biases: int = 0  # of `experts`: biases checkpoints keep in 16 bits (gpt-oss)
    # vision (and audio) towers + projectors of a multimodal checkpoint (kvplan.readers.towers.vision), 16-bit
    vision: int = 0
    vision_replicated: int = 0  # of `vision`: what every tensor-parallel rank holds whole (plain torch modules)

    @property
    def total(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.mlp + self.experts
                + self.shared_experts + self.router + self.other + self.vision)

    @property
    def active(self) -> int:
        """Parameters one text token touches: all but the routed experts it is not sent to and the
        vision/audio towers (they run on images and audio, not on each generated token)."""
        return self.total - self.vision - self.experts + self.experts_active

    @property
    def linear(self) -> int:
        return self.attention + self.mlp + self.experts + self.shared_experts


@dataclass(frozen=True)
class Quantization:
    """How the checkpoint stores its linear weights.

    `method` is one of the weight dtypes (bf16, fp16, fp32, fp8, int8, int4, mxfp4, nvfp4). `group_size`
    applies to int4 (one fp16 scale and a 4-bit zero per group) and fp8 block scales;
    `experts_only` is set when the method quantizes only MoE experts (MXFP4: vLLM's Mxfp4Config gives
    every linear layer UnquantizedLinearMethod). `kept` is ((role, parameters), ...) the checkpoint's
    exclusion list leaves in the model dtype (kvplan.readers.unquantized). `symmetric`: int4 groups carry a
    scale and no zero point (compressed-tensors `symmetric: true`: weight_packed + weight_scale only).
    `index_bytes`: GPTQ's g_idx tensors (int32, one per input feature of every quantized linear layer).
    """

    method: str = "bf16"
    group_size: int = 0
    experts_only: bool = False
    kept: tuple[tuple[str, int], ...] = ()
    symmetric: bool = False
    index_bytes: int = 0
    scale_bytes: int = 0  # bytes of one int4 group's scale; 0: fp16 (2). bitsandbytes: fp32 absmax (4), or
    # 1 with double quantization (uint8 absmax; the fp32 absmax of every 256 of them, 4 B per 16,384 weights, is
    # left out)
    input_groups: bool = False  # 8-bit GPTQ / AWQ / AutoRound: fp16 scale + 8-bit zero per group of inputs, not a tile
    # GPTQ / AWQ / AutoRound `group_size: -1`: one scale and zero per output row of each linear, counted from the
    # tensors' shapes (`block_shapes`, kvplan.readers.block_scales; groups of 128 where not read, said in a note)
    per_row: bool = False
    experts_method: str = ""  # the routed experts' own format when it differs from `method` (DeepSeek-V4: mxfp4)
    # int8 channel-wise (compressed-tensors W8A8): the fp32 scale per output channel, bytes of the (sharded,
    # replicated, experts) parts (kvplan.readers.channel_scales); () where there are none
    channel_scales: tuple[int, ...] = ()
    # the config's `quant_method` as written, lower-cased ("" without one): where it came from, not a format (left
    # out of ==); an engine that reads a method by name refuses one it lacks (kvplan.engines.sglang.quant_methods)
    quant_method: str = field(default="", compare=False)
    # GPTQ's `desc_act: true` with groups (group_size not -1): act-order, which vLLM refuses from 0.30.0
    # (kvplan.engines.vllm.gptq_order); no byte of its own (g_idx is stored either way: `index_bytes`)
    act_order: bool = field(default=False, compare=False)
    asym: bool = False  # GPTQ's `sym: false`: qzeros stored either way; the engines' kernels differ (vllm.gptq_order)
    # compressed-tensors' input_activations of the scheme read, (type, num_bits, strategy, dynamic, symmetric): W4A8
    input_quant: tuple = ()
    # compressed-tensors fp8 weights with no input_activations (W8A16, kvplan.engines.vllm.marlin_fp8), not `not
    # input_quant`; None: unknown, an entry of before round 41 (kvplan.sources.catalog.entry_quantization)
    weight_only: bool | None = False
    # attention projections ("linear_attn.in_proj_b", ...) `kept` holds in every layer that has them, which an engine's
    # block-FP8 shard check leaves alone (kvplan.readers.unquantized.kept_modules)
    kept_modules: tuple[str, ...] = ()
    # exclusion entries that keep part of the multi-token-prediction module (`mtp.fc`, ...) in 16 bits: nothing of
    # the target model; a drafter built from that module would read them (kvplan.readers.mtp.mtp_entries)
    mtp_kept: tuple[str, ...] = ()
    # what the reader says of its reading (an engine that reads the exclusion list otherwise: kvplan.readers.
    # exclusion_rules), printed where the model is read; not a format (left out of ==)
    notes: tuple[str, ...] = field(default=(), compare=False)
    # a block-quantized checkpoint's linear tensors by shape, whose block scales weight_bytes counts tensor by tensor
    # (kvplan.readers.block_scales); () where not read: the pooled count, params / group_size^2. Derived from the
    # spec, not a format (left out of ==) and not written to a catalog entry (computed again where one is read)
    block_shapes: tuple[BlockShape, ...] = field(default=(), compare=False)
    # the same checkpoint as an engine that reads its exclusion list by a rule of its own loads it: ((rule, Quantization
    # or the one-line refusal that reading meets), ...); () where no engine reads it otherwise (kvplan.readers.
    # exclusion_rules: "dotted" and "substring" are SGLang's fp8 / fbgemm_fp8 readings, and its ModelOpt ones with
    # "unread", kvplan.readers.modelopt_sglang; its engine picks one by release)
    readings: tuple = field(default=(), compare=False)

    def __post_init__(self):  # a catalog JSON gives lists
        object.__setattr__(self, "kept", tuple((str(r), int(c)) for r, c in self.kept))
        object.__setattr__(self, "kept_modules", tuple(str(m) for m in self.kept_modules))
        object.__setattr__(self, "mtp_kept", tuple(str(m) for m in self.mtp_kept))
        object.__setattr__(self, "notes", tuple(str(m) for m in self.notes))
        object.__setattr__(self, "channel_scales", tuple(int(b) for b in self.channel_scales))
        object.__setattr__(self, "input_quant", tuple(self.input_quant))
        object.__setattr__(self, "block_shapes", tuple(BlockShape(*s) for s in self.block_shapes))
        object.__setattr__(self, "readings", tuple((str(r), q if isinstance(q, (str, Quantization)) else
                                                    Quantization(**q)) for r, q in self.readings))

    def kept_of(self, role: str) -> int:
        return next((c for r, c in self.kept if r == role), 0)

    @property
    def group_format(self) -> tuple[bool, int, bool]:
        """linear_bytes' arguments past the group size: zero points, a group's scale bytes, groups along the inputs."""
        return not self.symmetric, self.scale_bytes or 2, self.input_groups

    def read_by(self, rule: str) -> Quantization:
        """The checkpoint as an engine reading its exclusion list by `rule` loads it: itself where no reading of that
        rule was made; a reading that met a refusal raises it (the engine cannot load what kvplan cannot plan)."""
        q = dict(self.readings).get(rule, self)
        if isinstance(q, str):
            raise KvplanError(q, EXIT_USAGE)
        return q

    def scaled(self, per) -> Quantization:
        """Every reading's kept parameters passed through `per` (a model cut to its first layers)."""
        return replace(self, kept=tuple((r, per(c)) for r, c in self.kept),
                       readings=tuple((rule, q if isinstance(q, str) else q.scaled(per)) for rule, q in self.readings))


@dataclass(frozen=True)
class RopeScaling:
    """A config's `rope_scaling` (transformers 5: `rope_parameters`) as engines read it to derive the
    context limit (kvplan.engines.context): the type, its factor, the positions it scales from
    (`original_max_position_embeddings` inside it), and the config's top-level
    `original_max_position_embeddings` (Phi-3's LongRoPE, read by vLLM for its default length)."""

    kind: str = "default"
    factor: float = 1.0  # 1.0 where the config gives none
    original: int = 0  # rope_scaling's original_max_position_embeddings; 0: not given
    top_original: int = 0  # the config's own top-level original_max_position_embeddings; 0: not given
    prescaled: bool = False  # the family's positions already count the factor (Gemma 3, whose factor vLLM skips)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: tuple[LayerSpec, ...]
    params: ParamCounts
    num_attention_heads: int
    hidden_size: int
    intermediate_size: int  # per token MLP width used for activation estimates (MoE: top_k x expert width)
    vocab_size: int
    max_context: int
    dtype: str = "bf16"  # the checkpoint's element type for unquantized tensors
    quantization: Quantization = field(default_factory=Quantization)
    checkpoint_bytes: int | None = None  # exact tensor bytes of the published checkpoint, when known
    # The checkpoint's own bytes by role where the file says each tensor's role (a GGUF: kvplan.sources.gguf_roles),
    # their total `checkpoint_bytes`; weight_bytes returns them for the file's own format. None: computed by role.
    file_weights: "WeightBytes | None" = None
    gguf_file: str = ""  # the GGUF file read (a split model's first part): what llama.cpp's -m loads; "": none
    rope_cache_elems: int = 0  # RoPE cos/sin table elements an engine precomputes (kvplan.readers.rope)
    rope_scaling: RopeScaling | None = None  # None: the config has none (kvplan.readers.rope.read_rope_scaling)
    # How `max_context` was set when an engine's rule or --max-model-len changed it (kvplan.engines.context),
    # in words; "": the config's own position count.
    context_rule: str = ""
    # The engine's max_model_len when one was asked for (--max-model-len; kvplan.engines.context.limited), which an
    # engine sizes its start-up by whatever context a plan asks; 0: none asked, the plan's context stands for it.
    max_model_len: int = 0
    family: str = ""
    architecture: str = ""
    # an MLA config's num_key_value_heads where it is not num_attention_heads (SGLang's ROCm MLA backend reads the
    # KV heads a rank has: kvplan.engines.sglang.attention); 0: the same
    mla_kv_heads: int = 0
    hf_repo: str | None = None
    aliases: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    source: str = ""
    # The vision_config's (num_hidden_layers, hidden_size) as config.json writes them, 0 for a key it leaves
    # out; () without a vision_config. SGLang scales its default mem_fraction_static by them (engines/sglang).
    vision_dims: tuple[int, ...] = ()
    mm_tokens_per_image: int = 0  # tokens one image becomes where the config fixes it (Gemma 3: 256); 0 unknown
    # Multi-token-prediction modules the checkpoint carries beside the main layers (DeepSeek-V3's
    # layer 61, Qwen3-Next's mtp.*): their cache layers and their own parameters (the embedding and
    # LM head they share with the model excluded). Engines load them only for speculative decoding,
    # so neither is in `layers` / `params` (kvplan.planning.speculative adds them when asked).
    mtp_layers: tuple[LayerSpec, ...] = ()
    mtp_params: ParamCounts | None = None
    # Set on the model as served with a drafter (kvplan.planning.speculative.apply): what was
    # added, for reports, explain lines and --emit. None: no speculative decoding.
    speculative: object = None
    draft: "ModelSpec | None" = None  # a separate draft model served beside this one (its own weights)
    # The KV-cache quantization the checkpoint declares (kvplan.readers.kv_quant); None: it declares none. An engine's
    # 'auto' cache dtype follows it or not by release (kvplan.engines.checkpoint_kv).
    checkpoint_kv: CheckpointKV | None = None

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def with_layers(self, n: int) -> ModelSpec:
        """The first n layers of the real pattern (for reduced validation runs), weights scaled."""
        if not 0 < n <= self.num_layers:
            raise KvplanError(f"{arg('layers')} must be between 1 and {self.num_layers}, got {n}", EXIT_USAGE,
                              param="layers", value=n, allowed=(1, self.num_layers))
        p = self.params
        per = lambda x: x * n // self.num_layers  # noqa: E731 - layer-proportional parts
        params = replace(
            p, attention=per(p.attention), mlp=per(p.mlp), experts=per(p.experts),
            experts_active=per(p.experts_active), shared_experts=per(p.shared_experts),
            router=per(p.router), other=per(p.other), replicated=per(p.replicated),
            num_moe_layers=per(p.num_moe_layers), expert_biases=per(p.expert_biases),
        )
        q = self.quantization.scaled(per)
        return replace(self, name=f"{self.name} (first {n} of {self.num_layers} layers)",
                       layers=self.layers[:n], params=params, checkpoint_bytes=None, quantization=q,
                       file_weights=None)

    def without_windows(self) -> ModelSpec:
        """The model as an engine runs it that applies none of its sliding windows (kvplan.model.layers.unwindowed):
        every local layer a full-attention one, the weights as they are."""
        return replace(self, layers=tuple(unwindowed(l) for l in self.layers))


@dataclass(frozen=True)
class WeightBytes:
    """Bytes of a model's weights, split the way tensor parallelism treats them."""

    sharded: int  # divided over tensor-parallel ranks
    replicated: int  # kept whole on every rank
    experts: int  # routed experts (sharded), counted apart so decode can read only active ones
    embedding: int  # first pipeline stage
    lm_head: int  # last pipeline stage
    vision: int = 0  # vision tower + projector: first stage, sharded over tensor-parallel ranks but for
    vision_replicated: int = 0  # (of `vision`) the part every tensor-parallel rank holds whole

    @property
    def total(self) -> int:
        return self.sharded + self.replicated + self.experts + self.embedding + self.lm_head + self.vision
