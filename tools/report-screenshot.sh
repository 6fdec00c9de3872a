#!/usr/bin/env bash
# Renders a tasp report the way a person sees it: headless Chromium (Debian package `chromium`) at 1400 px
# wide, full page, to a PNG. Usage: tools/report-screenshot.sh REPORT_DIR OUT.png [HEIGHT]
set -euo pipefail
dir=$(cd "$1" && pwd)
out=$2
height=${3:-2400}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "report-screenshot: no chromium (apt-get install chromium)"; exit 1; }
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,"$height" \
  --screenshot="$out" "file://$dir/report.html" > /dev/null 2>&1
echo "report-screenshot: $out"
