"""Per-epoch progress bars: tqdm when it is installed and wanted, a silent stand-in otherwise.

tqdm comes with the ``dev``/``bench`` extras only, so the training loop must run without it.
"""

from __future__ import annotations

from typing import Any

try:
    from tqdm import tqdm
except ImportError:  # optional dependency: no bar, same training
    tqdm = None


class NullBar:
    """The interface of the bar the loop uses, doing nothing.

    Example:
        >>> bar = NullBar(); bar.update(1); bar.set_postfix(loss=1.0); bar.close()
    """

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps (ignored)."""

    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        """Show metric values next to the bar (ignored)."""

    def close(self) -> None:
        """Finish the bar (ignored)."""


def progress_bar(total: int | None, initial: int, desc: str, enabled: bool = True) -> Any:
    """A tqdm bar for one epoch (it/s is tqdm's own rate), or a ``NullBar``.

    Args:
        total: batches in the epoch (None when the loader has no length).
        initial: batches already done (a run resumed mid-epoch starts part-way).
        desc: the label, e.g. ``"epoch 2/10"``.
        enabled: False always gives a ``NullBar``.

    Example:
        >>> progress_bar(10, 0, "epoch 1/1", enabled=False).__class__.__name__
        'NullBar'
    """
    if not enabled or tqdm is None:
        return NullBar()
    return tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True)


def format_metrics(values: dict[str, Any]) -> dict[str, str]:
    """Short strings for a bar's postfix; None values are left out.

    Example:
        >>> format_metrics({"loss": 0.123456, "accuracy": 0.5, "val_loss": None})
        {'loss': '0.1235', 'accuracy': '0.5000'}
    """
    return {k: f"{v:.4f}" for k, v in values.items() if isinstance(v, int | float)}
