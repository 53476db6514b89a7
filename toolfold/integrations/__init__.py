"""Runs on engines that outgrow one process: one optional subpackage per engine.

Nothing in the core imports these; each needs its extra (``toolfold[ray]``...).
"""
