"""nova-api's WSGI application (nova.wsgi.osapi_compute; before nova 31 the factory
nova.api.openstack.compute.wsgi.init_application) for gunicorn.

nova parses sys.argv as its own command line when the app is loaded; under
gunicorn that is gunicorn's command line, which nova refuses. Its config files
come from OS_NOVA_CONFIG_DIR (api-paste.ini and nova.conf), as with any WSGI
server, so nothing else is needed here.
"""
import sys

sys.argv = [sys.argv[0]]

try:
    from nova.wsgi.osapi_compute import application  # noqa: E402,F401
except ImportError:
    from nova.api.openstack.compute.wsgi import init_application  # noqa: E402

    application = init_application()
