"""A stand-in for the `expecttest` module, which PyTorch's test utilities import and Debian's
python3-torch does not ship. Only the base class is needed by the distributed suite; the
inline-expectation helper fails loudly if a test ever uses it."""
import unittest

ACCEPT = False  # common_utils reads it (whether to rewrite expectations in place)


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (PyTorch's name)
        self.assertEqual(str(actual).strip(), str(expect).strip())
