"""The sweep page's fixed parts (kvplan.report.html): its Content-Security-Policy (no network fetch, inline scripts
and styles only), stylesheet, the script that shows a page error in the page, and the script that draws the charts
and makes the table sortable and filterable. The simulation page (kvplan.report.simulation) shares the policy and
the error script, and both open with `page_head`.
"""

import html

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")

STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 6px}
p.meta{color:#555;margin:2px 0}
.chart{width:100%;min-height:320px}
table{border-collapse:collapse;font-size:12px;margin-top:8px}
th,td{border-bottom:1px solid #ddd;padding:3px 6px;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}
#plans td:nth-child(2),#plans td:nth-child(3),#plans td:nth-child(9),#plans td:nth-child(10){text-align:left}
td.no{color:#b00}
#headline td:nth-child(-n+3){text-align:left} #headline{font-size:14px}
#headline th,#headline td:nth-child(3){white-space:normal} #headline td:nth-child(3){min-width:14em;max-width:24em}
p.filters{position:sticky;top:0;background:#fff;padding:6px 0;margin:8px 0;z-index:2}
p.filters select{margin-right:12px}
h3{font-size:15px;margin:18px 0 4px}
#errors{color:#b00;white-space:pre-wrap}
"""

# Errors surface in the page (and the console): a report that half-rendered says so.
BOOT = """
window.addEventListener('error', function (e) {
  document.getElementById('errors').textContent += 'error: ' + e.message + '\\n';
});
"""

RENDER = """
(function () {
  var figs = JSON.parse(document.getElementById('kvplan-figures').textContent);
  var config = {responsive: true, displaylogo: false};
  Object.keys(figs).forEach(function (name) {
    var el = document.getElementById('chart-' + name);
    if (el) { Plotly.newPlot(el, figs[name].data, figs[name].layout, config); }
  });
  var fm = document.getElementById('f-model'), fc = document.getElementById('f-ctx');
  function filter() {
    var m = fm ? fm.value : '', c = fc ? fc.value : '';
    document.querySelectorAll('tr[data-model]').forEach(function (tr) {
      var show = (!m || tr.getAttribute('data-model') === m) && (!c || tr.getAttribute('data-ctx') === c);
      tr.style.display = show ? '' : 'none';
    });
    document.querySelectorAll('section[data-model]').forEach(function (sec) {
      sec.style.display = (!m || sec.getAttribute('data-model') === m) ? '' : 'none';
    });
    window.dispatchEvent(new Event('resize'));
  }
  if (fm) { fm.addEventListener('change', filter); }
  if (fc) { fc.addEventListener('change', filter); }
  // a link may carry the filters: report.html#model=NAME&ctx=32768
  var wanted = new URLSearchParams(location.hash.slice(1));
  if (fm && wanted.has('model')) { fm.value = wanted.get('model'); }
  if (fc && wanted.has('ctx')) { fc.value = wanted.get('ctx'); }
  if (wanted.has('model') || wanted.has('ctx')) { filter(); }
  var table = document.getElementById('plans');
  if (!table) { return; }
  table.querySelectorAll('th').forEach(function (th, i) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var text = th.getAttribute('data-k') === 't', dir = th.getAttribute('data-dir') === 'a' ? -1 : 1;
      th.setAttribute('data-dir', dir === 1 ? 'a' : 'd');
      rows.sort(function (a, b) {
        var x = a.cells[i].getAttribute('data-v'), y = b.cells[i].getAttribute('data-v');
        if (x === '' || y === '') { return (x === '') - (y === ''); }
        return dir * (text ? x.localeCompare(y) : parseFloat(x) - parseFloat(y));
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
"""


def page_head(title: str, style: str) -> str:
    """A page's opening up to its scripts: doctype, the policy, the viewport, `title` escaped, `style`, and BOOT (so
    an error in what follows shows in the page). The sweep and simulation pages both start so."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(str(title), quote=True)}</title><style>{style}</style><script>{BOOT}</script>")
