"""Type stubs of infinipipe._core (python/bindings/*.cc); the docstrings are in the module."""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

Array = np.ndarray  # float32, C order

class Error(RuntimeError): ...
class ConfigError(Error): ...

class BudgetError(ConfigError):
    least_budget: int
    rank: int

class ModelConfig:
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    ffn_hidden_size: int
    vocab_size: int
    seq_length: int
    max_position_embeddings: int
    rotary_base: float
    norm_epsilon: float
    tie_embeddings: bool
    init_method_std: float
    family: str  # llama | qwen2 | qwen3 | mistral
    qkv_bias: bool
    qk_norm: bool
    sliding_window: int  # 0 = none
    num_parameters: int
    llama_differences: str

class CostModel:
    @staticmethod
    def from_config(config: Config) -> CostModel: ...
    device: str

class Stage:
    index: int
    rank: int
    first_layer: int
    num_layers: int
    has_embedding: bool
    has_lm_head: bool

class Config:
    @staticmethod
    def from_args(args: Sequence[str], base: Optional[Config] = None) -> Config: ...
    @staticmethod
    def for_training(args: Sequence[str], world_size: int = 0) -> Config: ...
    @staticmethod
    def for_hf_model(config_json: str, origin: str, args: Sequence[str],
                     world_size: int = 0) -> Config: ...
    @staticmethod
    def from_yaml(text: str, origin: str = "<yaml>") -> Config: ...
    @staticmethod
    def notes(args: Sequence[str]) -> List[str]: ...
    @staticmethod
    def keys() -> List[str]: ...
    def to_yaml(self) -> str: ...
    def with_run_tokenizer(self) -> Config: ...
    def get(self, key: str) -> str: ...
    def with_stage_layout(self, cost_model: CostModel) -> Config: ...
    def stage_layout(self, cost_model: CostModel) -> List[Stage]: ...
    def lr_at(self, consumed_samples: int) -> float: ...
    model: ModelConfig
    pp: int
    dp: int
    vpp: int
    ulysses_degree: int
    schedule: str
    global_batch_size: int
    train_iters: int
    seed: int
    clip_grad: float
    device: str
    optimizer: str  # "adamw" | "sgd"
    lr: float
    weight_decay: float
    adam_betas: Tuple[float, float]
    adam_eps: float
    use_distributed_optimizer: bool
    bf16: bool
    p2p_timeout: float
    save: str
    tensorboard_dir: str
    has_training_data: bool
    has_evaluation_data: bool

def schedules() -> List[str]: ...

class Slice:
    seq: int
    offset: int
    len: int
    seq_len: int
    is_whole: bool
    is_tail: bool
    is_split: bool

class Chunk:
    id: int
    slices: List[Slice]
    kind: str  # "batched" | "split" | "hybrid"
    tokens: int

class Action:
    kind: str  # "forward" | "backward"
    chunk: int
    stage: int
    recompute_layers: int
    predicted_time: float

class Plan:
    schedule: str
    pp: int
    vpp: int
    seq_lengths: List[int]
    chunks: List[Chunk]
    pipeline_of_chunk: List[int]
    stages: List[Stage]
    actions: List[List[Action]]
    predicted_peak_bytes: List[int]
    predicted_step_time: float
    memory_budget: int
    forward_only: bool
    num_pipelines: int
    num_tokens: int
    def to_json(self) -> str: ...
    @staticmethod
    def from_json(text: str) -> Plan: ...
    def save(self, path: str) -> None: ...
    @staticmethod
    def load(path: str) -> Plan: ...

class PlanResult:
    plan: Plan
    setting: str
    def explain(self, config: Config, cost_model: CostModel) -> str: ...

def plan(lengths: Sequence[int], config: Config, cost_model: Optional[CostModel] = None,
         schedule: str = "", threads: int = 1) -> PlanResult: ...
def plan_forward_only(plan: Plan, cost_model: CostModel, config: Config) -> Plan: ...
def replica_split(lengths: Sequence[int], dp: int, cost_model: CostModel,
                  config: Config) -> List[List[int]]: ...

class StepResult:
    step_time: float
    bubble_ratio: List[float]
    bubble_ratio_mean: float
    peak_bytes: List[int]
    memory_budget: int
    oom: bool
    tokens: int
    tokens_per_second: float
    mfu: float
    hfu: float
    busy_time: List[float]

def simulate(plan: Plan, config: Config, cost_model: Optional[CostModel] = None) -> StepResult: ...
def search_layout(config: Config, batches: Sequence[Sequence[int]], num_devices: int = 0,
                  devices_per_node: int = 0, exhaustive: bool = False,
                  threads: int = 1) -> str: ...

class CostFeedback:
    def __init__(self, prior: CostModel) -> None: ...
    def observe(self, plan: Plan, plan_cost: CostModel, config: Config, rank: int,
                measured: Sequence[Tuple[int, float]]) -> str: ...
    def share(self) -> List[float]: ...
    def next_cost_model(self, summed: Sequence[float]) -> CostModel: ...
    def calibration_json(self, summed: Sequence[float], notes: str = "") -> str: ...
    samples: int

def init_params(config: Config, seed: Optional[int] = None, first_layer: int = 0,
                num_layers: Optional[int] = None, embedding: bool = True,
                lm_head: bool = True) -> Dict[str, Array]: ...
def reference_step(config: Config, params: Dict[str, Array],
                   sequences: Sequence[Sequence[int]]) -> Tuple[float, Dict[str, Array]]: ...

def checkpoint_latest(dir: str) -> Optional[int]: ...
def checkpoint_save_shard(dir: str, iteration: int, rank: int, num_ranks: int,
                          params: Dict[str, Array], config: Config,
                          optimizer_states: Dict[str, Tuple[int, Array, Array]] = ...,
                          with_optimizer: bool = True, rank_state: str = "",
                          small_files: Dict[str, bytes] = ..., model_part: int = -1,
                          model_parts: int = 0,
                          shapes: Dict[str, List[int]] = ...) -> None: ...
def checkpoint_commit(dir: str, config: Config, config_yaml: str, iteration: int,
                      consumed_samples: int, delay_state: str = "") -> None: ...

class CheckpointReader:
    def __init__(self, dir: str, iteration: int = -1) -> None: ...
    path: str
    iteration: int
    consumed_samples: int
    num_ranks: int
    model: ModelConfig
    optimizer_kind: str
    config_yaml: str
    delay_state: str
    def check_samples(self, config: Config) -> None: ...
    def rank_state(self, rank: int) -> str: ...
    def param_names(self) -> List[str]: ...
    def read_params(self, names: Sequence[str]) -> Dict[str, Array]: ...
    def read_optimizer(self, config: Config,
                       names: Sequence[str]) -> Dict[str, Tuple[int, Array, Array]]: ...
    def has_file(self, file: str) -> bool: ...
    def read_file(self, file: str) -> bytes: ...
    def check_model(self, model: ModelConfig) -> None: ...

def hf_folder_is(dir: str) -> bool: ...
def read_hf(dir: str) -> Tuple[ModelConfig, Dict[str, Array]]: ...
def export_hf(checkpoint_dir: str, out: str, dtype: str = "fp32") -> int: ...

def run_samples_message(config: Config) -> str: ...

# The run's setup (src/setup): `infinipipe train`'s auto layout and rank order.
def train_options_lenient(args: List[str], world_size: int = 0) -> Config: ...

class AutoLayout:
    args: List[str]  # the words given, the chosen degrees appended as flags
    lines: List[str]  # what the search printed

def resolve_auto_layout(args: List[str], world_size: int,
                        hosts: Sequence[Tuple[int, int, int]] = (), search_iterations: int = 4,
                        search_iterations_given: bool = False) -> AutoLayout: ...
def rank_order(config: Config, rank_hosts: List[str]) -> Tuple[str, str, bool]: ...
def train_problems(config: Config, runtime: str, words: List[str] = []) -> List[str]: ...
def run_train(backend: object, config: Config, config_yaml: str, metrics_path: str = "",
              timings_path: str = "", trace_dir: str = "", trace_iterations: str = "",
              trace_explain: bool = False, tensorboard_dir: str = "",
              quiet: bool = False) -> List[IterationMetrics]: ...

class TrainingBatches:
    def __init__(self, config: Config, cost_model: Optional[CostModel] = None) -> None: ...
    def resume(self, consumed_samples: int, delay_state: str = "") -> None: ...
    def next(self) -> List[List[int]]: ...
    consumed_samples: int
    delay_state: str
    prefixes: List[str]

def gpu_preset(reported_name: str) -> str: ...
def metrics_path(metrics: str, log_dir: str, trace: str, save: str) -> str: ...
def rank_path(path: str, rank: int) -> str: ...

class IterationMetrics:
    iteration: int
    train_iters: int
    consumed_samples: int
    loss: float
    sequences: int
    tokens: int
    predicted_tokens: int
    seconds: float
    plan_seconds: float
    plan_wait_seconds: float
    tokens_per_s: float
    lr: float
    grad_norm: float
    schedule: str
    plan_knobs: str
    chunks: int
    recompute_layers: int
    predicted_step_seconds: float
    measured_step_seconds: float
    predicted_peak_bytes: int
    measured_peak_bytes: int
    measured_activation_peak_bytes: int
    memory_budget: int
    rss_peak_bytes: int
    valid_loss: Optional[float]
    valid_tokens: int
    test_loss: Optional[float]
    test_tokens: int
    eval_seconds: float
    def __init__(self) -> None: ...
    def metrics_json(self) -> str: ...
