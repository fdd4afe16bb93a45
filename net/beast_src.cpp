// Beast compiled once for the whole program (BOOST_BEAST_SEPARATE_COMPILATION). It lives in
// crm_net, the lowest library that uses Beast; crm_http links crm_net.
#include <boost/beast/src.hpp>
