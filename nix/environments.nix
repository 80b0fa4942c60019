# The Python environments flake.nix builds from uv.lock, as uv2nix dependency specifications
# ({ package = [ extras ]; }). flake.nix and the CI resolution check (scripts/ci/nix_resolution.py)
# both read them here, so the check evaluates exactly what the flake builds.
#
# uv.lock declares one conflict: the verifiers extra (verifiers 0.4.0 needs openai<3) against the
# openai3 extra. uv2nix resolves a lock with conflicts only for a specification that selects one
# side of each, so the overlay names openai3 (the runner's own openai, what `uv sync` without the
# verifiers extra installs); no environment the flake builds has the verifiers extra.
{
  # What workspace.mkPyprojectOverlay resolves uv.lock for: the package set every venv below is
  # drawn from (uv2nix's default, the whole workspace, would select both sides of the conflict).
  overlay = {
    poisson-tasks = [
      "openai3"
      "dev"
    ];
  };

  # Each venv the flake builds: its spec, and (for the check) the flake outputs built from it and
  # whether the project is installed editable. The check compares each one's packages with
  # `uv export --locked` for the same extras.
  venvs = {
    runtime = {
      spec = {
        poisson-tasks = [ ];
      };
      outputs = [
        "packages.default"
        "packages.poisson-tasks"
        "packages.card"
        "apps.card"
        "apps.default"
        "checks.published"
      ];
      editable = false;
    };
    dev = {
      spec = {
        poisson-tasks = [ "dev" ];
      };
      outputs = [ "checks.tests" ];
      editable = false;
    };
    dev-shell = {
      spec = {
        poisson-tasks = [ "dev" ];
      };
      outputs = [ "devShells.default" ];
      editable = true;
    };
  };
}
