"""ctypes mirror of include/flashindexer/c_api.h (FI_C_ABI_VERSION 1).

Loads libflashindexer_c.so from $FLASHINDEXER_LIB, else from beside this file. The structs
list the C fields in the same order and types; `check` turns a nonzero status into an
exception that carries the library's message (argument, expected, actual)."""
import ctypes
import os

ABI_VERSION = 1

# Enumerations of c_api.h.
FORMATS = {"fp8_e4m3": 0, "mxfp4": 1}
WEIGHT_TYPES = {"fp32": 0, "bf16": 1}
ROW_FORMS = {"ragged": 0, "decode": 1}
ORDERS = {"position": 0, "rank": 1}
ACCURACIES = {"exact": 0, "production": 1}
BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
OPERATORS = {"dense_logits": 0, "topk_over_logits": 1, "fused_topk": 2}
STATUS_CODES = ["ok", "invalid_argument", "null_pointer", "misaligned", "overflow", "unsupported",
                "workspace_too_small", "backend_unavailable", "io_error", "format_error", "internal"]

_i32, _i64, _f32, _vp, _size = ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t


class IndexerProblem(ctypes.Structure):
    _fields_ = [
        ("format", _i32), ("page_size", _i32), ("pool", _vp), ("page_stride", _i64), ("num_pages", _i64),
        ("table", _vp), ("table_width", _i64), ("table_row_stride", _i64),
        ("num_heads", _i32), ("weight_type", _i32), ("q", _vp), ("q_row_stride", _i64), ("q_head_stride", _i64),
        ("q_scale", _vp), ("q_scale_row_stride", _i64), ("q_scale_head_stride", _i64),
        ("weights", _vp), ("weights_row_stride", _i64), ("weight_scale", _f32),
        ("row_form", _i32), ("num_requests", _i32), ("next_n", _i32), ("num_rows", _i64),
        ("row_batch", _vp), ("window_start", _vp), ("window_end", _vp), ("context_lens", _vp), ("max_context", _i64),
        ("k", _i32), ("order", _i32), ("accuracy", _i32),
    ]


class TopKProblem(ctypes.Structure):
    _fields_ = [
        ("logits", _vp), ("logits_row_stride", _i64), ("row_form", _i32), ("num_requests", _i32), ("next_n", _i32),
        ("num_rows", _i64), ("row_batch", _vp), ("window_start", _vp), ("window_end", _vp), ("context_lens", _vp),
        ("max_context", _i64), ("page_size", _i32), ("num_pages", _i64), ("table", _vp), ("table_width", _i64),
        ("table_row_stride", _i64), ("k", _i32), ("order", _i32),
    ]


class TopKOutputs(ctypes.Structure):
    _fields_ = [
        ("positions", _vp), ("positions_row_stride", _i64), ("slots", _vp), ("slots_row_stride", _i64),
        ("scores", _vp), ("scores_row_stride", _i64), ("counts", _vp), ("status", _vp),
    ]


class LogitsOutput(ctypes.Structure):
    _fields_ = [("logits", _vp), ("row_stride", _i64), ("status", _vp)]


class Launch(ctypes.Structure):
    _fields_ = [("backend", _i32), ("cpu_threads", _i32), ("workspace", _vp), ("workspace_bytes", _size),
                ("stream", _vp)]


class FlashIndexerError(RuntimeError):
    """A nonzero status of the library: .code is its name (e.g. "invalid_argument")."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class FlashIndexerArgumentError(FlashIndexerError, ValueError):
    """An argument the library refuses (its message names the argument, expected and actual)."""


class FlashIndexerUnsupported(FlashIndexerError, NotImplementedError):
    """Valid by the contract, but not supported by this backend or device."""


_ARGUMENT_CODES = {"invalid_argument", "null_pointer", "misaligned", "overflow", "workspace_too_small"}
_UNSUPPORTED_CODES = {"unsupported", "backend_unavailable"}


_lib = None


def lib():
    """The loaded library, its prototypes declared (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    path = os.environ.get("FLASHINDEXER_LIB") or os.path.join(os.path.dirname(__file__), "libflashindexer_c.so")
    l = ctypes.CDLL(path)
    P = ctypes.POINTER
    msg = [ctypes.c_char_p, _size]
    l.fi_abi_version.restype = ctypes.c_int
    for name in ("fi_indexer_problem_init", "fi_topk_problem_init", "fi_launch_init"):
        getattr(l, name).restype = None
    l.fi_indexer_problem_init.argtypes = [P(IndexerProblem)]
    l.fi_topk_problem_init.argtypes = [P(TopKProblem)]
    l.fi_launch_init.argtypes = [P(Launch)]
    l.fi_can_implement.argtypes = [P(IndexerProblem), _i32, P(Launch)] + msg
    l.fi_workspace_size.argtypes = [P(IndexerProblem), _i32, P(Launch), P(_size)] + msg
    l.fi_dense_logits.argtypes = [P(IndexerProblem), P(LogitsOutput), P(Launch)] + msg
    l.fi_fused_topk.argtypes = [P(IndexerProblem), P(TopKOutputs), P(Launch)] + msg
    l.fi_topk_can_implement.argtypes = [P(TopKProblem), P(Launch)] + msg
    l.fi_topk_workspace_size.argtypes = [P(TopKProblem), P(Launch), P(_size)] + msg
    l.fi_topk_over_logits.argtypes = [P(TopKProblem), P(TopKOutputs), P(Launch)] + msg
    if l.fi_abi_version() != ABI_VERSION:
        raise FlashIndexerError("internal", f"{path}: C ABI version {l.fi_abi_version()}, expected {ABI_VERSION}")
    _lib = l
    return l


def call(fn, *args):
    """Calls fn(*args, msg, len); returns None or raises FlashIndexerError with the library's text."""
    buf = ctypes.create_string_buffer(512)
    rc = fn(*args, buf, len(buf))
    if rc != 0:
        code = STATUS_CODES[rc] if 0 <= rc < len(STATUS_CODES) else str(rc)
        cls = (FlashIndexerArgumentError if code in _ARGUMENT_CODES else
               FlashIndexerUnsupported if code in _UNSUPPORTED_CODES else FlashIndexerError)
        raise cls(code, buf.value.decode(errors="replace"))


def new_problem():
    p = IndexerProblem()
    lib().fi_indexer_problem_init(ctypes.byref(p))
    return p


def new_topk_problem():
    p = TopKProblem()
    lib().fi_topk_problem_init(ctypes.byref(p))
    return p


def new_launch(backend="auto", stream=None, workspace=None, workspace_bytes=0, cpu_threads=0):
    l = Launch()
    lib().fi_launch_init(ctypes.byref(l))
    l.backend = BACKENDS[backend]
    l.cpu_threads = cpu_threads
    l.workspace = workspace
    l.workspace_bytes = workspace_bytes
    l.stream = stream
    return l
