# uv2nix's resolution of uv.lock for every venv nix/environments.nix declares, evaluated with the
# uv2nix and pyproject.nix trees flake.lock pins and nixpkgs' lib/ alone (no nixpkgs, no store).
#
#   nix-instantiate --eval --strict --json scripts/ci/nix_resolution.nix \
#     --argstr nixlib DIR --argstr pyprojectNix DIR --argstr uv2nix DIR --argstr root DIR
#
# The code that reads the lock is uv2nix's own, called as flake.nix calls it:
# workspace.loadWorkspace -> mkPyprojectOverlay (lock1.parseLock -> filterConflicts ->
# resolveDependencies, then build.local/build.remote per package) and mkEditablePyprojectOverlay
# for the dev shell; each venv's members come from pyproject.nix's own resolveCyclic (what
# mkVirtualEnv installs). Stand-ins replace what needs all of nixpkgs: the Python 3.12 interpreter
# (its marker and wheel-tag facts), stdenv (mkDerivation returns its attributes), glibc's version,
# fetchurl, and the build-system packages of pyproject-build-systems (leaves without a version).
# Prints { environ; overlaySpec; specs; overlay = { name = { version; format; }; };
# venvs = { name = [ package names ]; }; } as JSON.
{
  nixlib,
  pyprojectNix,
  uv2nix,
  root,
  environments ? root + "/nix/environments.nix",
}:
let
  dir = s: /. + s;
  lib = import (dir nixlib + "/lib");
  pyproject-nix = import (dir pyprojectNix) { inherit lib; };
  uv2nix' = import (dir uv2nix) { inherit lib pyproject-nix; };
  inherit (import (dir pyprojectNix + "/build/lib/resolvers.nix") { inherit lib; }) resolveCyclic;
  envs = import (dir environments);

  # nixpkgs' python312 and its stdenv on x86_64-linux, as far as marker and wheel-tag evaluation
  # read them (the values at the nixpkgs revision flake.lock pins: CPython 3.12, glibc 2.40).
  platform = lib.systems.elaborate "x86_64-linux";
  stdenv = {
    targetPlatform = platform;
    hostPlatform = platform;
    buildPlatform = platform;
    isLinux = true;
    isDarwin = false;
    cc.libc = {
      pname = "glibc";
      version = "2.40";
      linuxHeaders.version = "6.16";
    };
    mkDerivation = attrs: attrs;
  };
  python = {
    pname = "python3";
    version = "3.12.11";
    pythonVersion = "3.12";
    inherit stdenv;
    passthru = {
      implementation = "cpython";
      pythonVersion = "3.12";
      sourceVersion = {
        major = "3";
        minor = "12";
        patch = "11";
        suffix = "";
      };
    };
  };
  fakes = {
    inherit stdenv python;
    fetchurl = args: args // { passthru.url = args.url; };
    pythonManylinuxPackages = {
      manylinux1 = [ ];
      manylinux2010 = [ ];
      manylinux2014 = [ ];
    };
    resolveBuildSystem = _: [ ];
  };
  # callPackage: fill each argument without a default (and every one a stand-in exists for).
  callPackage =
    f: overrides:
    let
      wanted = lib.filterAttrs (n: hasDefault: !hasDefault || fakes ? ${n}) (builtins.functionArgs f);
    in
    f (lib.mapAttrs (n: _: fakes.${n} or null) wanted // overrides)
    // {
      override = more: callPackage f (overrides // more);
    };

  workspace = uv2nix'.lib.workspace.loadWorkspace { workspaceRoot = dir root; };
  overlay = workspace.mkPyprojectOverlay {
    sourcePreference = "wheel";
    dependencies = envs.overlay;
  };
  editable = workspace.mkEditablePyprojectOverlay { root = "/editable-root"; };
  prev = { inherit python stdenv; };
  base = overlay { inherit callPackage; } prev;
  withEditable = base // editable { } base;

  # Names a venv's packages depend on that uv.lock does not provide (the flake's
  # pyproject-build-systems overlay does): leaves, so the closure can name them.
  leaves =
    set:
    let
      deps = lib.concatMap (
        p:
        lib.attrNames (p.passthru.dependencies or { })
        ++ lib.concatMap lib.attrNames (lib.attrValues (p.passthru.optional-dependencies or { }))
      ) (lib.attrValues set);
    in
    lib.genAttrs (lib.filter (n: !set ? ${n}) (lib.unique deps)) (n: {
      pname = n;
      version = null;
      passthru = { };
    });
  complete = set: set // leaves set;
in
{
  # The marker environment the stand-in interpreter gives (the check evaluates `uv export`'s
  # markers in it, so both sides read uv.lock for the same Python and platform).
  environ = {
    python_version = python.passthru.pythonVersion;
    python_full_version = python.version;
    implementation_name = python.passthru.implementation;
    implementation_version = python.version;
    platform_python_implementation = "CPython";
    os_name = "posix";
    sys_platform = "linux";
    platform_system = "Linux";
    platform_machine = platform.parsed.cpu.name;
    platform_release = "";
    platform_version = "";
  };
  overlaySpec = envs.overlay;
  specs = lib.mapAttrs (_: venv: { inherit (venv) spec outputs editable; }) envs.venvs;
  overlay = lib.mapAttrs (_: p: {
    inherit (p) version;
    format = p.passthru.format or "local";
  }) base;
  venvs = lib.mapAttrs (
    _: venv: resolveCyclic (complete (if venv.editable then withEditable else base)) venv.spec
  ) envs.venvs;
}
