"""Everything only the Lessons page (and the lesson recorder, scripts/record/record_lessons.py) uses: the lesson
files (files.py), their experiments (experiments.py), the recorded measurements and their checks
(app/common/measurement.py, shared with the Sweep), computed conclusions (conclusions.py), the batch-table view (load.py) and the printable
worksheet (worksheet.py)."""
