"""Shared pytest set-up: one marker per chapter (`pytest -m chapter3` checks your chapter-03 answers)."""

from tinyedu.testing import exercises
from tinyedu.testing.exercise import chapter_marker


def pytest_configure(config):
    for chapter in sorted({e.chapter for e in exercises()}):
        config.addinivalue_line("markers", f"{chapter_marker(chapter)}: your answers to chapter {chapter}")
