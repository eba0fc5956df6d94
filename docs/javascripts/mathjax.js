// MathJax settings for the whole site: the walkthrough pages (arithmatex wraps math in \( \) and
// \[ \]) and the notebook pages (which keep the notebooks' $...$ and $$...$$).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
  },
  options: { ignoreHtmlClass: "highlight|jp-InputArea" },
};

// Material loads pages without a full reload: typeset each new page.
if (typeof document$ !== "undefined") {
  document$.subscribe(() => {
    if (window.MathJax && MathJax.typesetPromise) { MathJax.typesetPromise(); }
  });
}
