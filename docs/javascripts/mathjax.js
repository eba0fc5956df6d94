// MathJax settings for the whole site: the walkthrough pages (arithmatex wraps math in \( \) and
// \[ \]) and the notebook pages (which keep the notebooks' $...$ and $$...$$). MathJax itself is
// served by the site (javascripts/mathjax/, copied from the `mathjax` package by
// scripts/mkdocs_hooks.py), so math renders without a network.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
  },
  // Never typeset code: highlighted blocks, and notebook code cells with their printed outputs.
  // (Notebook markdown cells sit in a jp-InputArea too, so that class must not be ignored.)
  options: { ignoreHtmlClass: "tex2jax_ignore|highlight|jp-CodeCell" },
};

// Material loads pages without a full reload: typeset each new page.
if (typeof document$ !== "undefined") {
  document$.subscribe(() => {
    if (window.MathJax && MathJax.typesetPromise) { MathJax.typesetPromise(); }
  });
}
