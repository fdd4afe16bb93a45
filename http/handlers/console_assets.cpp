// The operator console's files, embedded as they are (see http/CMakeLists.txt): web/console/
// (its page, style and script) and uPlot's bundle from npm (web/package.json).
#ifndef CRM_UPLOT_DIR
#error "CRM_UPLOT_DIR must name uPlot's dist folder"
#endif
#ifndef CRM_CONSOLE_DIR
#error "CRM_CONSOLE_DIR must name web/console"
#endif

#define CRM_STR2(x) #x
#define CRM_STR(x) CRM_STR2(x)

// Defines crm_<name>_start and crm_<name>_end around the bytes of `path` (and a NUL after).
#define CRM_EMBED(name, path)                                                                      \
  asm(".section .rodata\n"                                                                         \
      ".global crm_" #name "_start\n"                                                              \
      ".type crm_" #name "_start, @object\n"                                                       \
      "crm_" #name "_start:\n"                                                                     \
      ".incbin \"" path "\"\n"                                                                     \
      ".global crm_" #name "_end\n"                                                                \
      ".type crm_" #name "_end, @object\n"                                                         \
      "crm_" #name "_end:\n"                                                                       \
      ".byte 0\n"                                                                                  \
      ".previous\n");

CRM_EMBED(console_html, CRM_STR(CRM_CONSOLE_DIR) "/index.html")
CRM_EMBED(console_js, CRM_STR(CRM_CONSOLE_DIR) "/console.js")
CRM_EMBED(console_css, CRM_STR(CRM_CONSOLE_DIR) "/console.css")
CRM_EMBED(uplot_js, CRM_STR(CRM_UPLOT_DIR) "/uPlot.iife.min.js")
CRM_EMBED(uplot_css, CRM_STR(CRM_UPLOT_DIR) "/uPlot.min.css")
