"""Layer 6, presentation: bertviz views, Altair charts, glue and numbered tables for the book, the
claims summary, the sentence explorer, and the comparison's tables and charts.
"""
