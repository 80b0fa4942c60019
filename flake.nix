{
  description = "poisson-tasks: the runner's locked environment (uv.lock through uv2nix), its card app, dev shell and checks";

  # flake.lock pins these four inputs. It was assembled from a public lock, not made here: see
  # docs/reproducibility.md ("The Nix flake"). The GPU serving stack (vLLM, CUDA) stays out of
  # the flake: docker/vllm.Containerfile pins it with the model weights.
  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

    pyproject-nix = {
      url = "github:pyproject-nix/pyproject.nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };

    uv2nix = {
      url = "github:pyproject-nix/uv2nix";
      inputs.pyproject-nix.follows = "pyproject-nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };

    pyproject-build-systems = {
      url = "github:pyproject-nix/build-system-pkgs";
      inputs.pyproject-nix.follows = "pyproject-nix";
      inputs.uv2nix.follows = "uv2nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
  };

  outputs =
    {
      self,
      nixpkgs,
      pyproject-nix,
      uv2nix,
      pyproject-build-systems,
      ...
    }:
    let
      inherit (nixpkgs) lib;
      # uv.lock is restricted to linux x86_64 ([tool.uv] environments in pyproject.toml).
      systems = [ "x86_64-linux" ];
      forAllSystems = lib.genAttrs systems;

      # The specs of every Python environment built here, in one file the CI resolution check
      # (scripts/ci/nix_resolution.py) evaluates too: uv.lock's openai conflict is decided there.
      environments = import ./nix/environments.nix;
      workspace = uv2nix.lib.workspace.loadWorkspace { workspaceRoot = ./.; };
      overlay = workspace.mkPyprojectOverlay {
        sourcePreference = "wheel";
        dependencies = environments.overlay;
      };
      editableOverlay = workspace.mkEditablePyprojectOverlay { root = "$REPO_ROOT"; };

      pythonSets = forAllSystems (
        system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
        in
        (pkgs.callPackage pyproject-nix.build.packages { python = pkgs.python312; }).overrideScope (
          lib.composeManyExtensions [
            pyproject-build-systems.overlays.wheel
            overlay
          ]
        )
      );

      # The runner's environment: exactly uv.lock's runtime packages, and the same with the dev extra.
      envs = forAllSystems (system: {
        runtime = pythonSets.${system}.mkVirtualEnv "poisson-tasks-env" environments.venvs.runtime.spec;
        dev = pythonSets.${system}.mkVirtualEnv "poisson-tasks-dev-env" environments.venvs.dev.spec;
      });

      # What the program records as its environment: hashes/environment_source reads this file
      # (POISSON_TASKS_PROVENANCE) and writes flake:<flake_lock_sha256> on every card.
      provenance = forAllSystems (
        system:
        nixpkgs.legacyPackages.${system}.writeText "poisson-tasks-provenance.json" (
          builtins.toJSON {
            source = "flake";
            flake_lock_sha256 = builtins.hashFile "sha256" ./flake.lock;
            uv_lock_sha256 = builtins.hashFile "sha256" ./uv.lock;
            rev = self.rev or "dirty";
            environment = "${envs.${system}.runtime}";
          }
        )
      );

      wrapper =
        system: name: args:
        nixpkgs.legacyPackages.${system}.writeShellApplication {
          inherit name;
          text = ''
            export POISSON_TASKS_PROVENANCE=${provenance.${system}}
            exec ${envs.${system}.runtime}/bin/poisson-tasks ${args} "$@"
          '';
        };
    in
    {
      packages = forAllSystems (system: {
        default = envs.${system}.runtime;
        poisson-tasks = wrapper system "poisson-tasks" "";
        card = wrapper system "poisson-tasks-card" "card";
        provenance = provenance.${system};
      });

      # nix run .#card -- prereg.yaml : validate, run and card a pre-registration.
      apps = forAllSystems (system: {
        card = {
          type = "app";
          program = "${self.packages.${system}.card}/bin/poisson-tasks-card";
        };
        default = {
          type = "app";
          program = "${self.packages.${system}.poisson-tasks}/bin/poisson-tasks";
        };
      });

      devShells = forAllSystems (
        system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
          pythonSet = pythonSets.${system}.overrideScope editableOverlay;
          venv = pythonSet.mkVirtualEnv "poisson-tasks-dev-env" environments.venvs.dev-shell.spec;
        in
        {
          # python, pytest, ruff and mypy come from uv.lock's dev extra; uv and hadolint from nixpkgs.
          default = pkgs.mkShell {
            packages = [
              venv
              pkgs.uv
              pkgs.hadolint
            ];
            env = {
              UV_NO_SYNC = "1";
              UV_PYTHON = pythonSet.python.interpreter;
              UV_PYTHON_DOWNLOADS = "never";
              POISSON_TASKS_PROVENANCE = "${provenance.${system}}";
            };
            shellHook = ''
              unset PYTHONPATH
              export REPO_ROOT=$(git rev-parse --show-toplevel)
            '';
          };
        }
      );

      checks = forAllSystems (
        system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
          dev = envs.${system}.dev;
        in
        {
          # The fast suite against the locked dev environment, on a copy of the source tree.
          tests = pkgs.runCommand "poisson-tasks-tests" { } ''
            cp -r ${./.} src && chmod -R u+w src && cd src
            export HOME=$TMPDIR PATH=${dev}/bin:$PATH POISSON_TASKS_PROVENANCE=${provenance.${system}}
            ${dev}/bin/python -m pytest -q -p no:cacheprovider
            touch $out
          '';
          # The published cards rebuilt byte for byte from their stored records.
          published = pkgs.runCommand "poisson-tasks-published" { } ''
            export HOME=$TMPDIR
            ${envs.${system}.runtime}/bin/poisson-tasks card --published
            touch $out
          '';
        }
      );
    };
}
