"""Amounts as the panel, the sidebar and the planner show them: :mod:`taskcell.spec.amounts`.

The one formatter lives in the spec layer, so that the cell's messages, the cluster's
feasibility errors and the planner's views write an amount alike; this module gives the planner
and the sidebar's generated constants (``labextension/src/snapshot.ts``) its names.
"""

from __future__ import annotations

from taskcell.spec import amounts
from taskcell.spec.amounts import shortfall, show_amount, show_bytes, show_number, significant

__all__ = ["BYTE_RESOURCES", "shortfall", "show_amount", "show_bytes", "show_number", "significant"]

#: Resources whose amounts are bytes, compared without regard to case.
BYTE_RESOURCES = amounts.BYTE_RESOURCES
