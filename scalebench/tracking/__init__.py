"""Tracking results over time: the history store and its trends, change points of a series
(pure) and of a whole store. Imports analysis, records and spec; never frameworks' packages,
launchers, running or reports."""
