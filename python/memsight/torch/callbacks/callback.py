"""The callback protocol memsight's training integrations implement.

Hooks: ``fit_start``, ``batch_start``, ``batch_end``, ``epoch_end``,
``fit_end`` and ``close``. Each takes an optional :class:`TrainState`. Given
one, the callback only reads it (its driver advances it: :class:`Callbacks`,
or a Lightning adapter); given none, the callback keeps its own state and
advances it itself, so a plain loop can call the hooks directly::

    oom = OOMObserver()
    oom.fit_start()
    for x, y in loader:
        oom.batch_start()
        ...
        oom.batch_end()
    oom.close()

Only set-up may raise (``fit_start``: a configuration error such as a
non-empty folder with ``overwrite=False``); every other hook logs its
failures to the ``memsight`` logger and returns, so a callback never breaks
the training loop.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from .._util.cuda import cuda_available
from .state import TrainState

log = logging.getLogger("memsight")


@runtime_checkable
class CallbackProtocol(Protocol):
    def fit_start(self, state: TrainState | None = None) -> None: ...
    def batch_start(self, state: TrainState | None = None) -> None: ...
    def batch_end(self, state: TrainState | None = None) -> None: ...
    def epoch_end(self, state: TrainState | None = None) -> None: ...
    def fit_end(self, state: TrainState | None = None) -> None: ...
    def close(self) -> None: ...


class Callback:
    """Base class: state handling and error isolation around ``_on_*`` hooks.

    Subclasses override ``_on_fit_start`` (may raise), ``_on_batch_start``,
    ``_on_batch_end``, ``_on_epoch_end``, ``_on_fit_end`` and ``_on_close``.
    """

    #: Whether the callback still acts; GPU-only ones turn this off on CPU.
    enabled: bool = True

    def __init__(self) -> None:
        self._own_state: TrainState | None = None
        self._closed = False

    # -- state -------------------------------------------------------------
    def _state(self, state: TrainState | None) -> tuple[TrainState, bool]:
        if state is not None:
            return state, False
        if self._own_state is None:
            self._own_state = TrainState()
        return self._own_state, True

    def _guard(self, hook: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("memsight: %s.%s failed (training continues)", type(self).__name__, hook)

    def _disable(self, message: str) -> None:
        """Warns once (for this instance) and turns the callback off."""
        if self.enabled:
            warnings.warn(message, UserWarning, stacklevel=3)
            log.info("memsight: %s", message)
        self.enabled = False

    def _require_cuda(self, state: TrainState, otherwise: str) -> bool:
        """True when there is a CUDA device and the model is on it (or not yet
        placed); else turns the callback off with a warning ending in ``otherwise``."""
        name = type(self).__name__
        if not cuda_available():
            self._disable(f"{name} needs a CUDA device, and none is available: {otherwise}.")
            return False
        if state.device is not None and state.device not in ("cuda", "meta"):
            self._disable(f"{name} needs a model on CUDA, but it is on {state.device}: {otherwise}.")
            return False
        return True

    # -- the protocol --------------------------------------------------------
    def fit_start(self, state: TrainState | None = None) -> None:
        st, own = self._state(state)
        if own:
            st.start_fit()
        else:
            st.ensure_run_name()
        self._closed = False
        self._on_fit_start(st)

    def batch_start(self, state: TrainState | None = None) -> None:
        st, own = self._state(state)
        if own:
            st.start_batch()
        if self.enabled:
            self._guard("batch_start", self._on_batch_start, st)

    def batch_end(self, state: TrainState | None = None, *, samples: int = 0, tokens: int = 0) -> None:
        st, own = self._state(state)
        if own:
            st.end_batch(samples, tokens)
        if self.enabled:
            self._guard("batch_end", self._on_batch_end, st)

    def epoch_end(self, state: TrainState | None = None) -> None:
        st, own = self._state(state)
        if own:
            st.end_epoch()
        if self.enabled:
            self._guard("epoch_end", self._on_epoch_end, st)

    def fit_end(self, state: TrainState | None = None) -> None:
        st, _ = self._state(state)
        if self.enabled:
            self._guard("fit_end", self._on_fit_end, st)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._guard("close", self._on_close)

    # -- for subclasses --------------------------------------------------------
    def _on_fit_start(self, state: TrainState) -> None:
        pass

    def _on_batch_start(self, state: TrainState) -> None:
        pass

    def _on_batch_end(self, state: TrainState) -> None:
        pass

    def _on_epoch_end(self, state: TrainState) -> None:
        pass

    def _on_fit_end(self, state: TrainState) -> None:
        pass

    def _on_close(self) -> None:
        pass


class Callbacks:
    """Drives several callbacks with one shared :class:`TrainState`.

    ::

        cbs = Callbacks(OOMObserver(), MemoryMonitor(), run_name="exp1")
        with cbs:                      # fit_start ... fit_end + close
            for epoch in range(n):
                for x, y in loader:
                    cbs.batch_start()
                    ...
                    cbs.batch_end(samples=len(x))
                cbs.epoch_end()
    """

    def __init__(self, *callbacks: Any, run_name: str | None = None, state: TrainState | None = None) -> None:
        flat: list[Any] = []
        for cb in callbacks:
            flat.extend(cb if isinstance(cb, Iterable) and not isinstance(cb, Callback) else [cb])
        self.callbacks = flat
        self.state = state if state is not None else TrainState(run_name=run_name)

    def fit_start(self) -> None:
        self.state.start_fit()
        for cb in self.callbacks:
            cb.fit_start(self.state)

    def batch_start(self) -> None:
        self.state.start_batch()
        for cb in self.callbacks:
            cb.batch_start(self.state)

    def batch_end(self, samples: int = 0, tokens: int = 0) -> None:
        self.state.end_batch(samples, tokens)
        for cb in self.callbacks:
            cb.batch_end(self.state)

    def epoch_end(self) -> None:
        self.state.end_epoch()
        for cb in self.callbacks:
            cb.epoch_end(self.state)

    def fit_end(self) -> None:
        for cb in self.callbacks:
            cb.fit_end(self.state)

    def close(self) -> None:
        for cb in self.callbacks:
            cb.close()

    def __enter__(self) -> Callbacks:
        self.fit_start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # After an exception (an OOM, say) the fit did not end: only close.
        try:
            if exc_type is None:
                self.fit_end()
        finally:
            self.close()
