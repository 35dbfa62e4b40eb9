import os
import sys

import pytest
import torch

# Run from a source tree without installing: FLASHINDEXER_LIB names the built library.
if os.environ.get("FLASHINDEXER_LIB"):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))

DEVICES = ["cpu"] + (["cuda"] if os.environ.get("FLASHINDEXER_TEST_CUDA") == "1" and torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)
