"""Tutorial 2: install a policy plugin package and use it in `specpolicy compare`."""

import os
import subprocess
import sys
from pathlib import Path

from common import SAMPLES, WORKDIR

package = Path(__file__).parent / "my-policy"
site = WORKDIR / "plugin-site"
# 1. Install the plugin package (here into a folder of its own, to keep your environment clean).
subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                "--target", str(site), str(package)], check=True)
env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}

# 2. specpolicy finds it through the `specpolicy` entry-point group.
listing = subprocess.run([sys.executable, "-m", "specpolicy.cli", "policies", "--format", "json"], env=env,
                         check=True, capture_output=True, text=True).stdout
assert '"entropy"' in listing and '"shrink"' in listing and '"my-policy"' in listing
print("entropy and shrink are registered by my-policy")

# 3. Compare them with the built-ins (entropy:3.5 passes 3.5 as the threshold; shrink4: after fewer than 4).
policies = "fixed16,entropy,entropy:3.5,shrink,shrink4,oracle,oracle-step"
table = subprocess.run([sys.executable, "-m", "specpolicy.cli", "compare", "--policies", policies,
                        "--max-samples", str(SAMPLES), "--format", "markdown"],
                       env=env, check=True, capture_output=True, text=True).stdout
print(table)
