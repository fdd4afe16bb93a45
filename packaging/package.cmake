# The Debian package (docs/operations.md "Debian package"): `cpack -G DEB` in a Release build
# (scripts/package does it and checks the result with lintian and systemd-analyze).
include(GNUInstallDirs)

set(CRM_PACKAGING ${CMAKE_SOURCE_DIR}/packaging)
set(CRM_PACKAGE_STAGE ${CMAKE_BINARY_DIR}/package-stage)
# Directories are 0755 whatever the umask of the build (a umask of 0002 made them 0775: lintian's non-standard-dir-perm).
set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

install(TARGETS carecrm RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Stripped as dh_strip does (CPACK_STRIP_FILES keeps the .comment and .note sections).
install(CODE "execute_process(COMMAND strip --remove-section=.comment --remove-section=.note
                              \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/carecrm
                              COMMAND_ERROR_IS_FATAL ANY)")
install(FILES ${CRM_PACKAGING}/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
        RENAME carecrm)
install(FILES ${CRM_PACKAGING}/carecrm.service DESTINATION /lib/systemd/system)
install(FILES ${CRM_PACKAGING}/carecrm.toml DESTINATION /etc/carecrm)

# The documentation Debian asks for: copyright, changelog (compressed, reproducibly), the man
# page made from `carecrm --help`, and the full configuration as an example.
add_custom_command(
  OUTPUT ${CRM_PACKAGE_STAGE}/carecrm.1.gz ${CRM_PACKAGE_STAGE}/changelog.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CRM_PACKAGE_STAGE}
  COMMAND help2man --no-info --no-discard-stderr --name "multi-tenant healthcare CRM API server"
          --version-string ${PROJECT_VERSION} --output ${CRM_PACKAGE_STAGE}/carecrm.1
          $<TARGET_FILE:carecrm>
  COMMAND gzip -9nf ${CRM_PACKAGE_STAGE}/carecrm.1
  COMMAND gzip -9nc ${CRM_PACKAGING}/changelog > ${CRM_PACKAGE_STAGE}/changelog.gz
  DEPENDS carecrm ${CRM_PACKAGING}/changelog
  VERBATIM)
add_custom_target(crm_package_docs ALL
  DEPENDS ${CRM_PACKAGE_STAGE}/carecrm.1.gz ${CRM_PACKAGE_STAGE}/changelog.gz)
install(FILES ${CRM_PACKAGE_STAGE}/carecrm.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CRM_PACKAGING}/copyright ${CRM_PACKAGE_STAGE}/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_SOURCE_DIR}/config/carecrm.toml DESTINATION ${CMAKE_INSTALL_DOCDIR}
        RENAME carecrm.toml.example)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME carecrm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "carecrm maintainers <maintainers@carecrm.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "multi-tenant healthcare CRM API server")
# Debian wraps the long description at 80 columns (lintian checks it); a lone "." is a blank line.
set(CPACK_PACKAGE_DESCRIPTION
    "carecrm keeps patients and other contacts, a sales pipeline, conversations
from messaging channels, workflows and webhooks, and AI assistants for
clinics, laboratories and hospitals, behind a REST API. Each tenant's data is
isolated; every access to health data is audited.
.
This package holds the server, its systemd unit and its configuration. It
needs PostgreSQL 15 and Redis 7, local or remote.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://carecrm.org")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, tzdata, hunspell-en-us, hunspell-pt-br, hunspell-es")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql (>= 15), redis-server (>= 5:7)")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CRM_PACKAGING}/conffiles ${CRM_PACKAGING}/postinst ${CRM_PACKAGING}/prerm
    ${CRM_PACKAGING}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_SET_DESTDIR OFF)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
