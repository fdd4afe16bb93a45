// Redoc's standalone bundle, embedded as it is (CRM_REDOC_JS: web/node_modules/redoc/bundles/
// redoc.standalone.js, see http/CMakeLists.txt).
#ifndef CRM_REDOC_JS
#error "CRM_REDOC_JS must name redoc.standalone.js"
#endif

#define CRM_STR2(x) #x
#define CRM_STR(x) CRM_STR2(x)

asm(".section .rodata\n"
    ".global crm_redoc_js_start\n"
    ".type crm_redoc_js_start, @object\n"
    "crm_redoc_js_start:\n"
    ".incbin \"" CRM_STR(CRM_REDOC_JS) "\"\n"
                                       ".global crm_redoc_js_end\n"
                                       ".type crm_redoc_js_end, @object\n"
                                       "crm_redoc_js_end:\n"
                                       ".byte 0\n"
                                       ".previous\n");
