"""The judge's arenas: what a worker maps is the judge's memory, with each input's layout kept."""

import os

import torch

from aka.harness.shared import Arena, OpenedArena, Slot


def _opened(arena: Arena) -> OpenedArena:
    return OpenedArena.open(arena.descriptor(), os.dup(arena.fd))


def test_a_column_major_input_keeps_its_strides_and_its_memory_is_shared() -> None:
    b = torch.arange(12, dtype=torch.float32).reshape(4, 3).t()  # (3, 4), column-major
    arena = Arena.allocate(torch.device("cpu"), [Slot.like("b", b), Slot("out", (2,), torch.float16)])
    arena.tensors["b"].copy_(b)
    worker = _opened(arena)
    assert worker.tensors["b"].stride() == b.stride() == (1, 3)
    assert torch.equal(worker.tensors["b"], b)
    worker.tensors["out"].fill_(7)
    assert arena.tensors["out"].tolist() == [7.0, 7.0]
    worker.close()
    arena.close()


def test_an_expanded_input_is_lent_contiguous_and_fp8_travels() -> None:
    row = torch.arange(4, dtype=torch.float32).expand(3, 4)
    fp8 = torch.linspace(-2, 2, 16).to(torch.float8_e4m3fn).reshape(4, 4)
    arena = Arena.allocate(torch.device("cpu"), [Slot.like("row", row), Slot.like("fp8", fp8)])
    arena.tensors["row"].copy_(row)
    arena.tensors["fp8"].copy_(fp8)
    worker = _opened(arena)
    assert worker.tensors["row"].is_contiguous() and torch.equal(worker.tensors["row"], row)
    assert worker.tensors["fp8"].dtype == torch.float8_e4m3fn
    assert torch.equal(worker.tensors["fp8"].float(), fp8.float())
    worker.close()
    arena.close()
