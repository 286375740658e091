// One row of choice buttons (lab.views.choice): a click chooses, nothing on the keyboard clears.
//
// Protocol with the kernel: the model's `value` is the chosen option or null; `disabled` locks the row.
// A click (or Enter or Space on a focused button) sets `value` to that button's option; a click on the
// chosen button keeps it; only the visible "clear" link sets it back to null. With `hand_over` set, a choice
// then selects the next notebook cell and gives it the keyboard focus, so that Shift-Enter runs that cell
// and not this row's own cell again (JupyterLab selects the cell under a mouse press and runs the selected
// cell). Outside JupyterLab (no .jp-Cell around the row) the focused button is only blurred.

function selectNextCell(el) {
  const cell = el.closest(".jp-Cell");
  let next = cell ? cell.nextElementSibling : null;
  while (next && !next.classList.contains("jp-Cell")) {
    next = next.nextElementSibling;
  }
  if (document.activeElement instanceof HTMLElement) {
    document.activeElement.blur();
  }
  if (!next) {
    return;
  }
  // The notebook selects a cell on a primary-button press inside it, and then focuses it.
  const opts = { bubbles: true, cancelable: true, button: 0, view: window };
  next.dispatchEvent(new MouseEvent("mousedown", opts));
  next.dispatchEvent(new MouseEvent("mouseup", opts));
  next.focus();
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "lab-choice";
  const label = document.createElement("div");
  label.className = "lab-choice-label";
  const row = document.createElement("div");
  row.className = "lab-choice-buttons";
  row.setAttribute("role", "radiogroup");
  const clear = document.createElement("button");
  clear.type = "button";
  clear.className = "lab-choice-clear";
  clear.textContent = "clear";
  clear.title = "clear this choice";
  const buttons = model.get("options").map((option) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "lab-choice-button";
    b.setAttribute("role", "radio");
    b.dataset.value = option;
    b.addEventListener("click", (event) => {
      event.stopPropagation();
      if (model.get("disabled")) {
        return;
      }
      model.set("value", option);
      model.save_changes();
      if (model.get("hand_over")) {
        selectNextCell(el);
      }
    });
    // Shift-Enter on a focused button means "run": the row hands over instead of choosing again.
    b.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.shiftKey || event.ctrlKey || event.metaKey || event.altKey)) {
        event.preventDefault();
        if (model.get("hand_over")) {
          selectNextCell(el);
        } else {
          b.blur();
        }
      }
    });
    row.appendChild(b);
    return b;
  });
  clear.addEventListener("click", (event) => {
    event.stopPropagation();
    if (!model.get("disabled")) {
      model.set("value", null);
      model.save_changes();
    }
  });
  row.appendChild(clear);

  function draw() {
    const value = model.get("value");
    const disabled = model.get("disabled");
    label.textContent = model.get("label");
    label.style.display = model.get("label") ? "" : "none";
    root.classList.toggle("lab-choice-locked", disabled);
    root.classList.toggle("lab-choice-inline", model.get("inline"));
    for (const b of buttons) {
      const chosen = b.dataset.value === value;
      b.classList.toggle("lab-choice-chosen", chosen);
      b.setAttribute("aria-checked", chosen ? "true" : "false");
      b.textContent = (chosen ? "\u2713 " : "") + b.dataset.value;
      b.disabled = disabled;
    }
    clear.style.visibility = value !== null && !disabled ? "visible" : "hidden";
    row.title = disabled ? (value === null ? "locked: no choice was made" : `locked: ${value}`) : "";
  }
  model.on("change:value", draw);
  model.on("change:disabled", draw);
  model.on("change:label", draw);
  model.on("change:inline", draw);
  draw();
  root.append(label, row);
  el.appendChild(root);
}

export default { render };
