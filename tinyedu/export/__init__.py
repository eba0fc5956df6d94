"""A trained model's forward pass as one standalone C program: `export_c(model, example_input)`.

program.py captures the forward pass's schedule and lowers every kernel for the target (targets.py:
portable C, or ARM NEON intrinsics), memory.py plans where the intermediate buffers live, cfile.py
writes the C file (and the sidecar weights). model.py holds what they pass along: ExportedProgram,
its buffers and its kernel calls. generator.py writes a GPT as a C program that generates text: a
driver around one exported decoding step.
Imports run one way: targets, memory <- model <- cfile <- program <- generator.
"""

from tinyedu.export.generator import export_generator
from tinyedu.export.memory import MemoryPlan, check_plan, place_buffers, plan_memory
from tinyedu.export.model import ExportedProgram, compile_and_run
from tinyedu.export.program import EMBED_LIMIT, buffer_lifetimes, export_c, lower_for_target
from tinyedu.export.targets import C_TARGET, TARGETS, Target, neon_target

__all__ = ["export_c", "ExportedProgram", "Target", "C_TARGET", "TARGETS", "neon_target", "EMBED_LIMIT",
           "lower_for_target", "compile_and_run", "plan_memory", "place_buffers", "check_plan", "MemoryPlan",
           "buffer_lifetimes", "export_generator"]
