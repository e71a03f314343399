"""Runnable consumers, one per event source; each records its side effects in a :class:`Ledger`."""
