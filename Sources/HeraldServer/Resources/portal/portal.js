// Progressive enhancement only: every page works without it.
// - Cascading selects: choosing a channel narrows the areas, an area narrows the subjects.
// - The push description is shown only for Alert subjects.
// - Delete forms ask first.
(function () {
  "use strict";

  function narrow(select, parent) {
    for (const option of select.options) {
      if (!option.value) continue;
      option.hidden = parent !== "" && option.dataset.parent !== parent;
    }
    const chosen = select.selectedOptions[0];
    if (chosen && chosen.hidden) select.value = "";
  }

  function wireCascade() {
    const channel = document.getElementById("channel");
    const area = document.getElementById("area");
    const subject = document.getElementById("topic_key");
    if (!channel || !area || !subject) return;
    const areaParents = {};
    for (const option of area.options) if (option.value) areaParents[option.value] = option.dataset.parent;

    function subjectsFor() {
      if (area.value) return narrow(subject, area.value);
      for (const option of subject.options) {
        if (!option.value) continue;
        option.hidden = channel.value !== "" && areaParents[option.dataset.parent] !== channel.value;
      }
      const chosen = subject.selectedOptions[0];
      if (chosen && chosen.hidden) subject.value = "";
    }

    channel.addEventListener("change", function () { narrow(area, channel.value); subjectsFor(); toggleDescription(); });
    area.addEventListener("change", function () { subjectsFor(); toggleDescription(); });
    subject.addEventListener("change", toggleDescription);

    // A subject chosen before (a form shown again with errors) selects its area and channel.
    const chosen = subject.selectedOptions[0];
    if (chosen && chosen.value) {
      area.value = chosen.dataset.parent;
      channel.value = areaParents[area.value] || "";
      narrow(area, channel.value);
      subjectsFor();
    }
    toggleDescription();
  }

  function toggleDescription() {
    const subject = document.getElementById("topic_key");
    const field = document.getElementById("desc-field");
    if (!subject || !field) return;
    const chosen = subject.selectedOptions[0];
    field.hidden = !!(chosen && chosen.value && chosen.dataset.distribution !== "Alert");
  }

  function wireConfirmations() {
    for (const form of document.querySelectorAll("form[data-confirm]")) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm)) event.preventDefault();
      });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    wireCascade();
    wireConfirmations();
  });
})();
