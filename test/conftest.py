import os
import sys

# The test modules share small helpers (`conv_testing`) from this folder:
sys.path.insert(0, os.path.dirname(__file__))
