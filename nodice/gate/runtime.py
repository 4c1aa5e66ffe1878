"""Where a candidate runs: device choice and the CPU (Triton interpreter) set-up."""

from __future__ import annotations

import os
from typing import Any

import torch

from nodice.errors import DeviceError

CPU_NOTE = (
    "CPU run: Triton kernels run under TRITON_INTERPRET=1 in float32, then dynamic validation "
    "again in float16 (where a kernel rounds to the storage dtype), because the interpreter "
    "does not compute bf16 (triton-lang/triton#11584); tl.dot is evaluated in float64 and "
    "rounded, so the interpreter's own BLAS cannot fake a violation"
)


def resolve_device(name: str | None) -> torch.device:
    """``cuda`` when available unless told otherwise."""
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda"):
        raise DeviceError(f"'{name}' (use cpu or cuda)")
    if name == "cuda" and not torch.cuda.is_available():
        raise DeviceError("cuda requested but no CUDA device is visible")
    return torch.device(name)


def prepare(device: torch.device) -> None:
    """Make Triton candidates runnable on ``device``. Must run before a candidate is imported."""
    if device.type != "cpu":
        return
    # triton.jit decides at decoration time whether to interpret.
    os.environ["TRITON_INTERPRET"] = "1"
    _install_deterministic_interpreter_dot()
    _patch_the_language_once_per_launch()
    _skip_the_discarded_overflow_checks()


def _install_deterministic_interpreter_dot() -> None:
    """Replace the interpreter's ``tl.dot`` (an OpenBLAS sgemm) with a batch-invariant one.

    OpenBLAS changes its summation order with the block shape, so an invariant
    ``tl.dot`` kernel would show bit differences when a row moves inside a tile.
    Products of fp16/fp32 operands summed in float64 and rounded once are
    independent of the block shape (to within float64 rounding).
    """
    try:
        import numpy as np
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    builder_cls = interpreter.InterpreterBuilder
    if getattr(builder_cls, "_nodice_dot", False):
        return
    original = builder_cls.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):  # type: ignore[no-untyped-def]
        if a.data.dtype.kind != "f" or b.data.dtype.kind != "f" or a.dtype.primitive_bitwidth == 8:
            return original(self, a, b, d, input_precision, max_num_imprecise_acc)
        exact = np.matmul(a.data.astype(np.float64), b.data.astype(np.float64))
        acc = (exact + d.data.astype(np.float64)).astype(d.data.dtype)
        return interpreter.TensorHandle(acc, d.dtype.scalar)

    builder_cls.create_dot = create_dot
    builder_cls._nodice_dot = True


def _skip_the_discarded_overflow_checks() -> None:
    """Don't compute the integer-overflow checks whose assertion the interpreter then drops.

    The interpreter's options ask for overflow sanitising (``sanitize_overflow``) with ``debug``
    off: every ``+``, ``-`` and ``*`` of 32-bit integers is done again in int64 and compared with
    the type's bounds, and ``device_assert`` returns at once without debug. With debug off the
    check decides nothing, so it is not computed (a third of a norm kernel's interpreter time);
    a builder in debug mode keeps it, and asserts.
    """
    try:
        import dataclasses

        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    builder: Any = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if not isinstance(options, interpreter.InterpreterOptions) or not hasattr(options, "sanitize_overflow"):
        return  # another Triton: leave its interpreter as it is
    if options.sanitize_overflow and not getattr(options, "debug", True):
        builder.options = dataclasses.replace(options, sanitize_overflow=False)


def _memoised(fn: Any) -> Any:
    """``fn`` of one argument, asked once per hashable argument (a block type is not: computed)."""
    known: dict[Any, Any] = {}

    def memoised(arg: Any) -> Any:
        try:
            return known[arg]
        except KeyError:
            known[arg] = value = fn(arg)
            return value
        except TypeError:
            return fn(arg)

    return memoised


def _patch_the_language_once_per_launch() -> None:
    """Skip the interpreter's re-patching of ``triton.language`` at every device-function call.

    A launch patches the language modules for its whole grid; each ``@triton.jit`` helper called
    inside it patches them again (``inspect.getmembers`` over the modules, never restored), about a
    quarter of the time of a kernel with helpers. A helper whose language modules the running launch
    already patched now reuses them; anything else is patched as before.
    """
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    if getattr(interpreter, "_nodice_patch_once", False):
        return
    if not all(hasattr(interpreter, n) for n in ("_patch_lang", "_LangPatchScope", "GridExecutor")):
        return  # another Triton: leave its interpreter as it is
    original_patch, original_launch = interpreter._patch_lang, interpreter.GridExecutor.__call__
    patched: list[set[int]] = []  # per running launch, the ids of the language modules it patched

    def languages(fn: Any) -> set[int]:
        return {id(v) for v in fn.__globals__.values() if v is tl or v is tl.core}

    def patch_lang(fn: Any) -> Any:
        if patched and languages(fn) <= patched[-1]:
            return interpreter._LangPatchScope()  # nothing to restore
        scope = original_patch(fn)
        if patched:
            patched[-1] |= languages(fn)
        return scope

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        patched.append(set())
        try:
            return original_launch(self, *args, **kwargs)
        finally:
            patched.pop()

    interpreter._patch_lang = patch_lang
    interpreter.GridExecutor.__call__ = launch
    # Which numpy dtype holds a Triton dtype: rebuilt as a dict of 19 entries on every call
    # (several per operation and program); a fixed mapping, so asked once per dtype. A block type
    # (unhashable) is held in its element's numpy dtype, which is asked once too.
    if hasattr(interpreter, "_get_np_dtype"):
        np_dtype = _memoised(interpreter._get_np_dtype)

        def get_np_dtype(tt_dtype: Any) -> Any:
            if isinstance(tt_dtype, tl.block_type):
                return np_dtype(tt_dtype.element_ty)
            return np_dtype(tt_dtype)

        interpreter._get_np_dtype = get_np_dtype
    _share_block_shapes()
    _list_the_builtins_once()
    interpreter._nodice_patch_once = True


def _list_the_builtins_once() -> None:
    """Find each language module's builtins once, not at every patching.

    A launch patches every builtin of ``triton.language``, its ``tensor``, ``math`` and
    ``triton.language.core`` with a wrapper that passes the interpreter's semantics, and finds them
    with ``inspect.getmembers`` every time: a few milliseconds a launch, a tenth of a norm kernel's
    gate. The modules' builtins don't change, so each module's are listed once: those that are
    builtins now, and those a patching left wrapped (their wrapper holds the builtin, as ``member``).
    Patching wraps the same builtins as before.
    """
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter

    if not all(hasattr(interpreter, n) for n in ("_patch_builtin", "_patch_attr")):
        return  # another Triton: leave its interpreter as it is
    patch_attr = interpreter._patch_attr
    listed: dict[int, tuple[Any, list[tuple[str, Any]]]] = {}

    def builtin_of(member: Any) -> Any:
        if tl.core.is_builtin(member):
            return member
        if getattr(member, "__name__", "") == "<lambda>":  # a wrapper a patching left in place
            original = (getattr(member, "__kwdefaults__", None) or {}).get("member")
            if original is not None and tl.core.is_builtin(original):
                return original
        return None

    def builtins(pkg: Any) -> list[tuple[str, Any]]:
        known = listed.get(id(pkg))
        if known is None or known[0] is not pkg:
            found = [(name, b) for name, m in inspect.getmembers(pkg) if (b := builtin_of(m)) is not None]
            listed[id(pkg)] = known = (pkg, found)
        return known[1]

    def patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        for name, member in builtins(pkg):
            patch_attr(pkg, name, member, builder, scope)

    interpreter._patch_builtin = patch_builtin


def _int_dims(shape: Any, core: Any) -> tuple[int, ...] | None:
    """The dimensions of a shape given as a list or a ``tl.tuple`` of ints or constexpr ints, else None."""
    if not isinstance(shape, (list, core.tuple)):
        return None
    dims = tuple(d.value if isinstance(d, core.constexpr) else d for d in shape)
    return dims if dims and all(type(d) is int for d in dims) else None


def _share_block_shapes() -> None:
    """Build a shape's ``tl.tuple``, element count and text once per shape, not once per value.

    Under the interpreter every operation makes a new ``tl.block_type`` and ``tl.tensor``, and each
    of them rebuilds its shape as a ``tl.tuple`` (typing each dimension), checks that every
    dimension is a power of two and formats its name: a fifth to a quarter of a kernel's time. A
    shape is immutable once built, so the first value of each shape is built as before (its checks
    and errors included) and later ones share what it computed.
    """
    try:
        from triton.language import core
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    block_type, tensor = getattr(core, "block_type", None), getattr(core, "tensor", None)
    if block_type is None or tensor is None or not hasattr(core, "tuple") or not hasattr(core, "constexpr"):
        return  # another Triton: leave its language as it is
    build_block_type, build_tensor = block_type.__init__, tensor.__init__
    # A shape's (tl.tuple, element count, text), by its dimensions and by the id of its tl.tuple
    # (kept alive here, so an id stays its own): with_element_ty passes the tl.tuple itself.
    by_dims: dict[tuple[int, ...], tuple[Any, int, str]] = {}
    by_id: dict[int, tuple[Any, int, str]] = {}
    # A tensor's (numel, shape) constexprs, by the id of its block type's shared tl.tuple; scalars.
    tensor_shapes: dict[int, tuple[Any, Any]] = {}
    scalar: list[tuple[Any, Any]] = []

    def init_block_type(self: Any, element_ty: Any, shape: Any) -> None:
        known = by_id.get(id(shape))
        if known is None:
            dims = _int_dims(shape, core)
            known = by_dims.get(dims) if dims is not None else None
            if known is None:
                build_block_type(self, element_ty, shape)
                if dims is not None:
                    by_dims[dims] = by_id[id(self.shape)] = (self.shape, self.numel, str(self.shape))
                return
        self.element_ty = element_ty
        self.shape, self.numel, text = known
        self.name = f"<{text}, {element_ty}>"

    def init_tensor(self: Any, handle: Any, type: Any) -> None:
        if type.is_block():
            key = id(type.shape)
            known = tensor_shapes.get(key)
        else:
            key, known = None, scalar[0] if scalar else None
        if known is None:
            build_tensor(self, handle, type)
            if key is None:
                scalar.append((self.numel, self.shape))
            elif key in by_id:
                tensor_shapes[key] = (self.numel, self.shape)
            return
        self.handle = handle
        self.numel, self.shape = known
        self.type = type
        self.dtype = type.scalar

    block_type.__init__ = init_block_type
    tensor.__init__ = init_tensor

    # Broadcasting compares each operand's shape with the result's, a list of ints, through
    # tl.tuple's ==, which first rebuilds the list as a typed tl.tuple (of the same ints): the
    # values compare with the list itself, to the same constexpr(bool).
    compare = core.tuple.__eq__

    def equal(self: Any, other: Any) -> Any:
        if type(other) is list and all(type(v) is int for v in other):
            return core.constexpr(self.values == other)
        return compare(self, other)

    core.tuple.__eq__ = equal
    # Scalar types are module-level singletons (tl.float32 …), compared by name at every cast.
    if hasattr(core, "dtype"):
        same_name = core.dtype.__eq__

        def same_type(self: Any, other: Any) -> Any:
            return True if self is other else same_name(self, other)

        core.dtype.__eq__ = same_type
