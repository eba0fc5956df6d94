"""tinyedu.export: the forward pass as a standalone C program, compiled with a plain `cc -O2 file.c -lm`
and run with no Python, must give tinyedu's outputs: on real MNIST digits for the MLP and the CNN
(read straight from the IDX file by the program), on the Transformer and the LSTM (integer inputs,
constants inside the forward pass, hundreds of kernels); the memory plan never lets two live buffers
share a byte; weights embedded (PORT=1) and in a sidecar file agree; AddressSanitizer and UBSan find
nothing; bad input gets a clear error."""

from __future__ import annotations

import functools
import gzip
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.datasets import mnist
from tinyedu.export import C_TARGET, Target, check_plan, export_c, neon_target, plan_memory
from tinyedu.export.memory import MemoryPlan
from tinyedu.models import LSTMRegressor, MnistCNN, Transformer
from tinyedu.models.tasks import mnist_split, normalize_mnist
from tinyedu.nn import Linear
from tinyedu.nn.optim import Adam
from tinyedu.nn.state import get_parameters

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler")


class MLP:  # chapter 08's models
    def __init__(self) -> None:
        self.l1, self.l2 = Linear(784, 256), Linear(256, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x.flatten(1)).relu())


CNN = MnistCNN  # chapter 08's


def _trained(model: object, images: np.ndarray, labels: np.ndarray, steps: int = 40) -> object:
    """A few Adam steps on chapter 08's training split: enough to read digits well above chance."""
    train_idx, _ = mnist_split(images)
    x_all = normalize_mnist(images).reshape(-1, 1, 28, 28)
    opt = Adam(get_parameters(model), lr=3e-3)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        idx = rng.choice(train_idx, 64, replace=False)
        with Tensor.train():
            opt.zero_grad()
            model(Tensor(x_all[idx])).cross_entropy(Tensor(labels[idx].astype(np.int32))).backward()
            opt.step()
    return model


def _digits_reader(model: object):
    """uint8 pixels in, (logits, predicted digit) out: the program reads the IDX file's bytes as they are."""
    def forward(pixels: Tensor) -> tuple[Tensor, Tensor]:
        x = (pixels.float() / 255 - 0.1307) / 0.3081
        logits = model(x.reshape(-1, 1, 28, 28))
        return logits, logits.argmax(1)
    return forward


@functools.cache
def _trained_on_mnist(make: type) -> object:
    """Trained once per test session (the NEON test reuses the CNN); exporting never changes a model."""
    images, labels = mnist()
    Tensor.manual_seed(0)
    return _trained(make(), images, labels)


@pytest.mark.mnist
@pytest.mark.parametrize("make", [MLP, CNN], ids=["mlp", "cnn"])
def test_mnist_program_matches_tinyedu_on_real_digits(make: type, tmp_path: Path) -> None:
    images, labels = mnist()
    forward = _digits_reader(_trained_on_mnist(make))
    program = export_c(forward, Tensor(images[:100]), name=make.__name__.lower())
    executable = program.compile(tmp_path)
    _, held_out = mnist_split(images)
    batches = images[held_out].reshape(-1, 100, 28, 28)  # the 2,000 held-out digits, 20 batches of 100
    logits, digits = program.run(executable, batches)
    expected = [forward(Tensor(b)) for b in batches]
    np.testing.assert_allclose(logits, np.stack([e[0].numpy() for e in expected]), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(digits, np.stack([e[1].numpy() for e in expected]))
    assert (digits.reshape(-1) == labels[held_out]).mean() > 0.8  # trained: it reads digits

    # The whole test file, straight from the IDX bytes (16-byte header skipped), printed as text: no Python.
    raw = tmp_path / "t10k-images-idx3-ubyte"
    folder = os.environ.get("MNIST_PATH")
    gzipped = Path(folder) / "t10k-images-idx3-ubyte.gz" if folder else None
    from_file = gzipped is not None and gzipped.is_file()
    raw.write_bytes(gzip.decompress(gzipped.read_bytes()) if from_file else _idx_bytes(images))
    done = subprocess.run(program.command(executable, "-t", "-s", "16", str(raw)), capture_output=True,
                          text=True, check=True)
    printed = np.array([int(line.split("|")[1]) for line in done.stdout.splitlines()])
    assert len(printed) == 10_000
    np.testing.assert_array_equal(printed[held_out], digits.reshape(-1))


def _idx_bytes(images: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, 3]) + b"".join(int(n).to_bytes(4, "big") for n in images.shape)
    return header + images.tobytes()


def _conv_net() -> tuple[CNN, np.ndarray]:
    Tensor.manual_seed(1)
    model = CNN()
    with Tensor.train():  # some running statistics that are not 0 and 1
        model(Tensor(np.random.default_rng(0).standard_normal((8, 1, 28, 28)).astype(np.float32)))
    x = np.random.default_rng(1).standard_normal((3, 4, 1, 28, 28)).astype(np.float32) * 3
    return model, x


def test_memory_plan_of_a_program_is_sound_and_saves_memory(tmp_path: Path) -> None:
    model, x = _conv_net()
    program = export_c(model, Tensor(x[0]), name="cnn")
    scratch = [b for b in program.buffers if b.role == "scratch"]
    plan = MemoryPlan({id(b): b.allocation for b in scratch}, program.arena_bytes["float32"])
    check_plan(plan)
    assert program.stats["scratch_bytes"] == plan.size < program.stats["unplanned_scratch_bytes"]
    assert plan.size <= plan.peak() + 64 * len(scratch)  # at the lower bound, up to alignment
    for call in program.calls:  # a kernel never writes over what it reads
        out, *ins = call.buffers
        for b in ins:
            if b.role == out.role == "scratch":
                assert not out.allocation.overlaps_in_memory(b.allocation)
    (out,) = program.run(program.compile(tmp_path), x)
    np.testing.assert_allclose(out, np.stack([model(Tensor(b)).numpy() for b in x]), rtol=1e-4, atol=1e-5)


def test_plan_memory_random_lifetimes() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        firsts = rng.integers(0, 20, n)
        buffers = {k: ((int(f), int(f + rng.integers(0, 6))), int(rng.integers(1, 5000))) for k, f in
                   enumerate(firsts)}
        plan = plan_memory(buffers)
        check_plan(plan)
        assert plan.peak() <= plan.size <= plan.unplanned + 64 * n
    chain = {k: ((k, k + 1), 1000) for k in range(10)}  # a chain of layers: two buffers alive at a time
    assert plan_memory(chain).size == 2 * 1024


def test_sidecar_weights_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, x = _conv_net()
    monkeypatch.setenv("PORT", "0")
    sidecar = export_c(model, Tensor(x[0]), name="cnn")
    monkeypatch.setenv("PORT", "1")
    embedded = export_c(model, Tensor(x[0]), name="cnn")
    assert not sidecar.embedded and embedded.embedded
    assert "static const _Alignas(64) float conv1_weight[72] = {" in embedded.source
    exe_sidecar = sidecar.compile(tmp_path / "sidecar")
    exe_embedded = embedded.compile(tmp_path / "embedded")
    np.testing.assert_array_equal(sidecar.run(exe_sidecar, x)[0], embedded.run(exe_embedded, x)[0])
    # the wrong weights file, and an input that ends inside a batch: clear errors, no output
    (tmp_path / "bad.weights").write_bytes(b"TINYEDUW" + bytes(8) + bytes(100))
    bad = subprocess.run(sidecar.command(exe_sidecar, "-w", str(tmp_path / "bad.weights")), input=b"",
                         capture_output=True)
    assert bad.returncode == 2 and b"is not the weights file of this program" in bad.stderr
    short = subprocess.run(embedded.command(exe_embedded), input=x[0].tobytes()[:1000], capture_output=True)
    assert short.returncode == 1
    assert b"the input ends inside batch 0 (input0: 1000 of 12544 bytes)" in short.stderr
    assert short.stdout == b""
    empty = subprocess.run(embedded.command(exe_embedded), input=b"", capture_output=True)
    assert empty.returncode == 1 and empty.stdout == b""
    assert b"the input is empty; it needs at least one batch of 12544 bytes" in empty.stderr


def test_transformer_and_lstm_programs(tmp_path: Path) -> None:
    """Integer token inputs, constants made inside the forward pass (the causal mask's aranges), and a
    recurrent network unrolled over its time steps."""
    Tensor.manual_seed(2)
    gpt = Transformer(12, 8, dim=16, n_heads=2, n_layers=2)
    tokens = np.random.default_rng(0).integers(0, 12, (2, 3, 8)).astype(np.int32)
    program = export_c(gpt, Tensor(tokens[0]), name="gpt")
    (logits,) = program.run(program.compile(tmp_path / "gpt"), tokens)
    expected = np.stack([gpt(Tensor(t)).numpy() for t in tokens])
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)
    lstm = LSTMRegressor(2, 8)
    x = np.random.default_rng(1).standard_normal((2, 4, 12, 2)).astype(np.float32)
    program = export_c(lstm, Tensor(x[0]), name="lstm")
    assert program.stats["kernels"] >= 12  # at least one per time step: the recurrence is sequential
    (y,) = program.run(program.compile(tmp_path / "lstm"), x)
    np.testing.assert_allclose(y, np.stack([lstm(Tensor(b)).numpy() for b in x]), rtol=1e-4, atol=1e-5)


def test_program_is_clean_under_sanitizers_and_warnings(tmp_path: Path) -> None:
    """-Wall -Wextra -pedantic say nothing; AddressSanitizer and UBSan see no out-of-bounds access."""
    model, x = _conv_net()
    program = export_c(model, Tensor(x[0]), name="cnn")
    program.save(tmp_path)
    warnings = subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-pedantic", "-c",
                               str(tmp_path / "cnn.c"), "-o", str(tmp_path / "cnn.o")],
                              capture_output=True, text=True)
    assert warnings.returncode == 0 and warnings.stderr == "", warnings.stderr
    probe = subprocess.run(["cc", "-fsanitize=address,undefined", "-x", "c", "-", "-o", str(tmp_path / "p")],
                           input="int main(void) { return 0; }", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("the C compiler has no AddressSanitizer here")
    executable = program.compile(tmp_path, extra_flags=("-fsanitize=address,undefined",
                                                       "-fno-sanitize-recover=all", "-g"))
    (out,) = program.run(executable, x)
    np.testing.assert_allclose(out, np.stack([model(Tensor(b)).numpy() for b in x]), rtol=1e-4, atol=1e-5)


def test_export_errors() -> None:
    model, x = _conv_net()
    with pytest.raises(TypeError, match="example input 0 must be a Tensor"):
        export_c(model, x[0])
    with pytest.raises(ValueError, match="must be a C identifier"):
        export_c(model, Tensor(x[0]), name="my model")
    with pytest.raises(ValueError, match="output 0 is already in memory"):
        export_c(lambda t: t, Tensor(x[0]))
    with pytest.raises(TypeError, match="must return a Tensor"):
        export_c(lambda t: 3, Tensor(x[0]))
    with Tensor.train():  # the program is always the eval-mode forward pass (BatchNorm's running statistics)
        program = export_c(model, Tensor(x[0]))
    assert "running_mean" in program.source


# The same portable C, cross-compiled for arm64 (aarch64 Linux) and run under qemu-user; and the NEON
# target, whose kernels are NEON intrinsics (natively compiled on an arm64 machine).
ARM64_C = Target("c-aarch64", C_TARGET.renderer, 4, ("aarch64-linux-gnu-gcc",), ("-O2", "-static"),
                 ("qemu-aarch64",))
NEON = neon_target()


def _tools(target: Target) -> bool:
    return all(shutil.which(tool) for tool in (*target.compiler, *target.run_prefix))


NO_ARM64 = "no aarch64 cross compiler (aarch64-linux-gnu-gcc) and qemu-aarch64 here"


@pytest.mark.parametrize("target", [ARM64_C, NEON], ids=["portable-c", "neon"])
def test_arm64_programs_match_tinyedu(target: Target, tmp_path: Path) -> None:
    """The portable C file cross-compiled for arm64 (where fmaf is one instruction: multiply_add uses
    it), and the NEON target's file (every vector operation an intrinsic), under qemu: tinyedu's
    outputs."""
    if not _tools(target):
        pytest.skip(NO_ARM64)
    model, x = _conv_net()
    program = export_c(model, Tensor(x[0]), name="cnn", target=target)
    if target is NEON:
        assert "#include <arm_neon.h>" in program.source and "floatx4" not in program.source
        assert "vfmaq_f32(" in program.source and "vld1q_f32(" in program.source
    executable = program.compile(tmp_path)
    if shutil.which("file"):  # an aarch64 executable (cross-compiled, or native on an arm64 machine)
        kind = subprocess.run(["file", str(executable)], capture_output=True, text=True).stdout
        assert "ARM aarch64" in kind or "arm64" in kind, kind
    (out,) = program.run(executable, x)
    np.testing.assert_allclose(out, np.stack([model(Tensor(b)).numpy() for b in x]), rtol=1e-4, atol=1e-5)


@pytest.mark.mnist
def test_neon_program_reads_digits_as_the_c_program_does(tmp_path: Path) -> None:
    """Chapter 08's CNN, trained, exported for NEON and for portable C: on the 2,000 held-out digits both
    programs predict the same digits, with logits equal within float32 rounding."""
    if not _tools(NEON):
        pytest.skip(NO_ARM64)
    images, _ = mnist()
    forward = _digits_reader(_trained_on_mnist(CNN))
    _, held_out = mnist_split(images)
    batches = images[held_out].reshape(-1, 100, 28, 28)
    results = {}
    for target in (C_TARGET, NEON):
        program = export_c(forward, Tensor(images[:100]), name="cnn", target=target)
        results[target.name] = program.run(program.compile(tmp_path / target.name), batches)
    (c_logits, c_digits), (neon_logits, neon_digits) = results["c"], results["neon"]
    np.testing.assert_array_equal(neon_digits, c_digits)
    np.testing.assert_allclose(neon_logits, c_logits, rtol=1e-4, atol=1e-4)


def test_targets_and_missing_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A NEON file can be written anywhere (only compiling and running need the tools); an unknown
    target and a compiler that is not installed get clear errors."""
    model, x = _conv_net()
    with pytest.raises(ValueError, match="unknown target 'cuda'; the targets are c, neon"):
        export_c(model, Tensor(x[0]), target="cuda")
    monkeypatch.setenv("NEON_CC", "no-such-aarch64-gcc")
    program = export_c(model, Tensor(x[0]), name="cnn", target="neon")
    assert "Build: no-such-aarch64-gcc" in program.source or not program.target.run_prefix
    if program.target.run_prefix:
        with pytest.raises(RuntimeError, match="'no-such-aarch64-gcc', which target 'neon' needs, is not "
                                               "installed.*gcc-aarch64-linux-gnu"):
            program.compile(tmp_path)
